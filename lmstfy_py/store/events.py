"""An Engine's event streams (a part of Engine, store/engine.py; SPEC 13 Events and Stream)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from lmstfy_py.store.engine_base import EngineBase
from lmstfy_py.types import Event, Gap


class EventOps(EngineBase):
    async def open_events(
        self, ns: str, queues: Sequence[str], after: str | None, idle_s: float = 15.0
    ) -> AsyncIterator[Event | Gap | None]:
        """The event stream of `queues` (store/jobstore.py)."""
        raise NotImplementedError
