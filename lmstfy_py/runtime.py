"""Everything one server process holds while it runs: pools, the admin stores, background loops.

Built once from the Config and handed to the web apps explicitly (no module globals), so tests
can build as many as they need. `_open` is the one place where the parts are wired together: it
enters each on one AsyncExitStack in dependency order (the pools first), so leaving it stops them
in the reverse order, and every field of the Runtime it builds is set from the start.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from lmstfy_py import metrics, tracing
from lmstfy_py.admin import switches
from lmstfy_py.admin.limits import LimitStore
from lmstfy_py.admin.pushers import PusherStore
from lmstfy_py.admin.rates import RateCounter, RateStore
from lmstfy_py.admin.switches import Switch
from lmstfy_py.admin.tokens import TokenStore
from lmstfy_py.config import Config
from lmstfy_py.push.manager import PushManager
from lmstfy_py.store.engine import TimerSignal
from lmstfy_py.store.health import Health
from lmstfy_py.store.lmstfy_format import LmstfyMover
from lmstfy_py.store.observers import Observers
from lmstfy_py.store.pools import Pools
from lmstfy_py.store.pump import Pump
from lmstfy_py.store.scheduler import Scheduler
from lmstfy_py.tasks import Background

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Runtime:
    config: Config
    pools: Pools
    tokens: TokenStore
    limits: LimitStore
    pushers: PusherStore  # the configurations; the admin API changes them
    rates: RateStore  # publish and consume counts per queue and minute, for the dashboard
    # Switched at run time by POST /accesslog on any process (admin/switches.py).
    access_log_switch: Switch
    # The parts below run only with `run_pumps` (tests of the web layer alone go without): without,
    # the lists are empty and the three parts exist but were never started.
    collector: metrics.Collector  # refreshes the size and Redis gauges
    flusher: metrics.Flusher  # writes the counts of this process to the metrics files
    push: PushManager  # runs this process's push groups
    pumps: list[Pump]
    schedulers: list[Scheduler]  # fire the recurring jobs
    health: list[Health]  # one check per pool; they log outages
    _stack: contextlib.AsyncExitStack = field(repr=False, compare=False)  # what stop() leaves

    @property
    def access_log(self) -> bool:
        return self.access_log_switch.on

    @classmethod
    @contextlib.asynccontextmanager
    async def running(cls, config: Config, run_pumps: bool = True) -> AsyncIterator[Runtime]:
        """The started Runtime, stopped when the block is left (see `start`)."""
        runtime = await cls.start(config, run_pumps)
        try:
            yield runtime
        finally:
            await runtime.stop()

    @classmethod
    async def start(cls, config: Config, run_pumps: bool = True) -> Runtime:
        """Connects the pools; with `run_pumps` also starts the background loops (timer pumps,
        schedulers, health checks, metrics collector, rate flush, pushers). `stop()` ends what it
        started, also what a start that failed half-way had started."""
        stack = contextlib.AsyncExitStack()
        try:
            return await cls._open(config, run_pumps, stack)
        except BaseException:
            await stack.aclose()
            raise

    @classmethod
    async def _open(cls, config: Config, run_pumps: bool, stack: contextlib.AsyncExitStack) -> Runtime:
        # Left last: what was counted since the flusher's last turn (or with no flusher at all).
        stack.callback(metrics.flush)
        # The wiring, in one place: every engine is counted by the metrics and the rate counter (its traced
        # steps exported as spans with an OTLP endpoint) and tells its pool's timer pump of the timers it
        # adds; every Redis command is counted by the metrics.
        timers = {name: TimerSignal() for name in config.pools}
        counter = RateCounter()
        # Entered before the pools, so left after them: the spans of their last steps still leave.
        spans = await stack.enter_async_context(tracing.exporting(config.tracing))
        observers = Observers(metrics.EngineMetrics(), counter, *([spans] if spans is not None else []))
        pools = await stack.enter_async_context(
            Pools.connect(config.pools, observers, timers, metrics.redis_command_counter)
        )
        lmstfy_layouts = await pools.serve_lmstfy_layouts(config.pools)
        # Tokens, limits, switches, rates and pushers live in the admin pool's own Redis (the old one
        # while it migrates).
        admin = pools.own(config.admin_pool).redis
        names = pools.names()
        tokens, limits, pushers = TokenStore(admin, names), LimitStore(admin, names), PusherStore(admin, names)
        lmstfy_admin = _LmstfyAdmin(tokens, limits)
        if lmstfy_layouts and not pools.lmstfy_unsure:
            await lmstfy_admin.adopt()
        await stack.enter_async_context(limits)
        switch = await stack.enter_async_context(switches.access_log(admin, config.server.access_log))
        engines = pools.engines()
        rates = RateStore(admin, counter)
        push = PushManager(pools, pushers, config.push)  # told of every configuration change
        runtime = cls(
            config,
            pools,
            tokens,
            limits,
            pushers,
            rates,
            switch,
            collector=metrics.Collector(pools),
            flusher=metrics.Flusher(),
            push=push,
            pumps=[Pump(engine, timers[engine.pool]) for engine in engines] if run_pumps else [],
            schedulers=[Scheduler(engine) for engine in engines] if run_pumps else [],
            health=[Health(engine) for engine in engines] if run_pumps else [],
            _stack=stack,
        )
        if run_pumps:
            await stack.enter_async_context(push)
            movers = [LmstfyMover(f, lmstfy_admin.adopt, f.pool in pools.lmstfy_unsure) for f in lmstfy_layouts]
            for part in runtime._background(movers):
                await stack.enter_async_context(part)
        return runtime

    def _background(self, movers: list[LmstfyMover]) -> list[Background]:
        """The loops, in the order they start (and the reverse of their stop)."""
        return [
            self.flusher,
            self.collector,
            self.rates,
            *self.health,
            *self.pumps,
            *self.schedulers,
            *movers,
            self.pushers,
        ]

    async def stop_waiting(self) -> None:
        """Answers every waiting long-poll now and stops pushing; the first step of a graceful stop."""
        await self.push.stop()  # its long-polls would otherwise start again at once
        for engine in self.pools.engines():
            await engine.stop_waiting()

    async def stop(self) -> None:
        """Stops every part in the reverse order of its start; the pools close last."""
        await self._stack.aclose()


class _LmstfyAdmin:
    """Takes in lmstfy's admin keys once per process: its tokens are already where lmstfy-py looks,
    but their namespaces and lmstfy's limits are copied so the admin API and throttling see them.
    At start when a pool was found to hold lmstfy's data, else when its LmstfyMover first finds it."""

    def __init__(self, tokens: TokenStore, limits: LimitStore) -> None:
        self.tokens, self.limits = tokens, limits
        self.adopted = False

    async def adopt(self) -> None:
        if self.adopted:
            return
        namespaces, limits = await self.tokens.adopt_lmstfy(), await self.limits.adopt_lmstfy()
        self.adopted = True
        if namespaces or limits:
            log.info("from lmstfy's admin keys: %d namespaces with tokens, %d limits", namespaces, limits)
