"""The request core of Client and AsyncClient, written once: the constructor, the send with its
retries, and each data-plane method (declared in methods.py as the `Call` it sends).

The send is a coroutine over two hooks, the request and the pause between attempts. AsyncClient's
hooks await; Client's block, so its coroutine never suspends and `run_blocking` takes its result
at once, on the caller's thread (no event loop).

`request` marks a method's declaration: a body building the `Call` to send, or a coroutine over
`_send` (a method sending several requests). Each client class gets the method as a function of
its own (blocking, or `async def`) with the declaration's name, docstring and parameters, so both
show the same methods to `help()`, `inspect` and editors; mypy reads the declaration through
`request.__get__`: `str` from Client, an awaitable of `str` from AsyncClient.
"""

from __future__ import annotations

import functools
import inspect
import re
import ssl
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar, cast, overload

from lmstfy_py.client.calls import Answer, Call
from lmstfy_py.client.connection import Endpoint, pool_options
from lmstfy_py.client.errors import LmstfyError
from lmstfy_py.client.retry import TRANSPORT_ERRORS, RetryPolicy, transport_failure
from lmstfy_py.client.routes import Routes

P = ParamSpec("P")
T = TypeVar("T")
Build = Callable[..., Any]  # a declaration's body: a Call, or a coroutine


class Requests:
    """What both clients are: a namespace's routes, a server, its retries, and the send over them."""

    def __init__(
        self,
        url: str,
        namespace: str,
        token: str,
        *,
        timeout: float = 30.0,
        retries: int = 5,
        backoff: float = 0.1,
        max_backoff: float = 2.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """`url` is the data API (`http://host:7777`; https with `ssl_context`, or the system's CAs).
        `timeout` bounds connecting, each read and each write (a long-poll's read gets its wait on
        top). Failed requests are retried as retry.py says: `retries` more attempts, backing off from
        `backoff` seconds up to `max_backoff`.
        """
        self.namespace = namespace
        self.routes = Routes(namespace)
        self.retry = RetryPolicy(retries, backoff, max_backoff)
        self._endpoint = Endpoint.of(url, token, timeout)
        self._connect(pool_options(ssl_context))

    def _connect(self, options: dict[str, Any]) -> None:
        """Opens the client's pool of connections (httpcore's, with these options)."""
        raise NotImplementedError

    async def _request(self, call: Call[Any]) -> Answer:
        raise NotImplementedError

    async def _pause(self, seconds: float) -> None:
        raise NotImplementedError

    async def _send(self, call: Call[T]) -> T:
        attempt = 0
        while True:
            try:
                answer = await self._request(call)
            except TRANSPORT_ERRORS as exc:
                failure: LmstfyError = transport_failure(exc)
            else:
                if answer.status != 503:
                    return call.read(answer)
                failure = answer.error()
            delay = self.retry.delay(attempt, failure, call.repeatable)
            if delay is None:
                raise failure
            await self._pause(delay)
            attempt += 1

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A client class (one defining `send`) gets every `request` of its bases as a method of its own."""
        super().__init_subclass__(**kwargs)
        if "send" not in vars(cls) or not issubclass(cls, Blocking | Awaiting):
            return
        for base in reversed(cls.__mro__):
            for name, declared in vars(base).items():
                if isinstance(declared, request) and name not in vars(cls):
                    setattr(cls, name, _method(cls, name, declared.build))


def run_blocking(work: Coroutine[Any, Any, T]) -> T:
    """The result of a coroutine that never suspends (Client's sends: their I/O blocks instead)."""
    try:
        work.send(None)
    except StopIteration as done:
        return cast(T, done.value)
    work.close()
    raise RuntimeError("a blocking client's request waited for an event loop")


class Blocking:
    """A client whose methods block until the answer (Client)."""

    @staticmethod
    def sending(build: Build) -> Callable[..., Any]:
        if inspect.iscoroutinefunction(build):

            def routine(self: Requests, /, *args: Any, **kwargs: Any) -> Any:
                return run_blocking(build(self, *args, **kwargs))

            return routine

        def method(self: Requests, /, *args: Any, **kwargs: Any) -> Any:
            return run_blocking(self._send(build(self, *args, **kwargs)))

        return method


class Awaiting:
    """A client whose methods are awaited (AsyncClient)."""

    @staticmethod
    def sending(build: Build) -> Callable[..., Any]:
        if inspect.iscoroutinefunction(build):
            return build

        async def method(self: Requests, /, *args: Any, **kwargs: Any) -> Any:
            return await self._send(build(self, *args, **kwargs))

        return method


# Lower case: it is used as a decorator, and named like one.
class request(Generic[P, T]):
    """A data-plane method declared once: `build(self, ...)` answers the Call it sends, or is a
    coroutine over `self._send`."""

    @overload
    def __init__(self, build: Callable[Concatenate[Any, P], Call[T]]) -> None: ...
    @overload
    def __init__(self, build: Callable[Concatenate[Any, P], Coroutine[Any, Any, T]]) -> None: ...
    def __init__(self, build: Callable[Concatenate[Any, P], Any]) -> None:
        self.build = build
        self.__doc__ = build.__doc__

    @overload
    def __get__(self, client: None, owner: type[Any]) -> Self: ...
    @overload
    def __get__(self, client: Blocking, owner: type[Any]) -> Callable[P, T]: ...
    @overload
    def __get__(self, client: Awaiting, owner: type[Any]) -> Callable[P, Coroutine[Any, Any, T]]: ...
    def __get__(self, client: object, owner: type[Any]) -> Any:
        # Only a class that is neither client reaches this: each client has the method of its own.
        return self if client is None else functools.partial(self.build, client)


def _method(cls: type[Blocking | Awaiting], name: str, build: Build) -> Callable[..., Any]:
    method = cls.sending(build)
    if method is build:  # an `async def` declaration is AsyncClient's method as it stands
        return method
    functools.update_wrapper(method, build)
    del method.__wrapped__  # type: ignore[attr-defined]  # inspect reads __signature__, not the builder's
    method.__module__, method.__qualname__ = cls.__module__, f"{cls.__name__}.{name}"
    signature = inspect.signature(build)
    returned = _sent(signature.return_annotation)
    method.__signature__ = signature.replace(return_annotation=returned)  # type: ignore[attr-defined]
    method.__annotations__ = {**build.__annotations__, "return": returned}
    return method


def _sent(annotation: Any) -> Any:
    """What sending a `Call[X]` answers: X (annotations are text here, `from __future__ import annotations`)."""
    found = re.fullmatch(r"Call\[(.*)\]", annotation) if isinstance(annotation, str) else None
    return found[1] if found else annotation
