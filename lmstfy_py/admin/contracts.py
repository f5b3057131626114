"""The contracts of admin/lua/*.lua, as store/contracts/ holds the store's: KEYS and ARGV
NamedTuples in the scripts' order, named as their headers name them (a last field typed as a
tuple is the variadic rest), and each reply's parser."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

from lmstfy_py.store.function_library import FunctionLibrary, folder_library
from lmstfy_py.store.scripts import A, K, R, Script, Step


@functools.cache
def _admin_library() -> FunctionLibrary:
    return folder_library("lmstfy_py.admin", [])


def admin_step(name: str, keys: type[K], args: type[A], parse: Callable[[Any], R]) -> Step[K, A, R]:
    """The Step of admin/lua/NAME.lua."""
    library = _admin_library()  # which read every step's file
    return Step(Script(name, library.steps[name], library), keys, args, parse)


def _ignored(reply: Any) -> None:
    return None


def _window(reply: Any) -> int | None:
    return None if reply is None else int(reply)


class LimitKeys(NamedTuple):
    limits: str
    version: str


class LimitSetArgs(NamedTuple):
    field: str
    limit: str
    only_new: str


LIMIT_SET = admin_step("limit_set", LimitKeys, LimitSetArgs, bool)


class LimitDeleteArgs(NamedTuple):
    fields: tuple[str, ...]


LIMIT_DELETE = admin_step("limit_delete", LimitKeys, LimitDeleteArgs, int)


class CounterKeys(NamedTuple):
    counter: str


class TakeArgs(NamedTuple):
    units: int
    interval: int


THROTTLE_TAKE = admin_step("throttle_take", CounterKeys, TakeArgs, _window)


class GiveBackArgs(NamedTuple):
    window: int


THROTTLE_GIVE_BACK = admin_step("throttle_give_back", CounterKeys, GiveBackArgs, _ignored)


class LoginArgs(NamedTuple):
    count_failure: str
    window: int


class Failures(NamedTuple):
    failures: int
    left_ms: int


LOGIN_FAILURES = admin_step("login_failures", CounterKeys, LoginArgs, Failures._make)


class RatesKeys(NamedTuple):
    rates: str


class RatesArgs(NamedTuple):
    expiry: int
    pairs: tuple[str | int, ...]


RATES_ADD = admin_step("rates_add", RatesKeys, RatesArgs, _ignored)


class SwitchKeys(NamedTuple):
    switch: str


class SwitchArgs(NamedTuple):
    state: str


SWITCH_SET = admin_step("switch_set", SwitchKeys, SwitchArgs, int)


class TokenKeys(NamedTuple):
    tokens: str
    grants: str


class TokenArgs(NamedTuple):
    token: str


def _grant(reply: Any) -> bytes | None:
    return None if reply is None else bytes(reply)


TOKEN_GRANT = admin_step("token_grant", TokenKeys, TokenArgs, _grant)


class TokenDeleteArgs(NamedTuple):
    tokens: tuple[str, ...]


TOKEN_DELETE = admin_step("token_delete", TokenKeys, TokenDeleteArgs, int)


class TokenCreateArgs(NamedTuple):
    token: str
    description: str
    grant: str


TOKEN_CREATE = admin_step("token_create", TokenKeys, TokenCreateArgs, bool)
