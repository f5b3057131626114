"""Everything one server process holds while it runs: pools, the admin stores, background loops.

Built once from the Config and handed to the web apps explicitly (no module globals), so tests
can build as many as they need. `start` is the one place where the parts are wired together.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Protocol

from lmstfy_py import metrics
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

log = logging.getLogger(__name__)


class Background(Protocol):
    """A part that runs tasks.Loops of its own between start and stop."""

    def start(self) -> None: ...

    async def stop(self) -> None: ...


@dataclass
class Runtime:
    config: Config
    pools: Pools
    tokens: TokenStore
    limits: LimitStore
    pushers: PusherStore  # the configurations; the admin API changes them
    rates: RateStore  # publish and consume counts per queue and minute, for the dashboard
    pumps: list[Pump] = field(default_factory=list)
    schedulers: list[Scheduler] = field(default_factory=list)  # fire the recurring jobs
    health: list[Health] = field(default_factory=list)  # one check per pool; they log outages
    collector: metrics.Collector | None = None  # refreshes the size and Redis gauges
    flusher: metrics.Flusher | None = None  # writes the counts of this process to the metrics files
    push: PushManager | None = None  # runs this process's push groups
    # Switched at run time by POST /accesslog on any process (admin/switches.py).
    access_log_switch: Switch | None = None
    background: list[Background] = field(default_factory=list)  # started in order, stopped in reverse

    @property
    def access_log(self) -> bool:
        return self.access_log_switch.on if self.access_log_switch else self.config.server.access_log

    @classmethod
    async def start(cls, config: Config, run_pumps: bool = True) -> Runtime:
        """Connects the pools; with `run_pumps` also starts the background loops (timer pumps,
        schedulers, health checks, metrics collector, rate flush, pushers), which tests of the web layer
        alone go without."""
        # The wiring, in one place: every engine is counted by the metrics and the rate counter and
        # tells its pool's timer pump of the timers it adds; every Redis command is counted by the metrics.
        timers = {name: TimerSignal() for name in config.pools}
        counter = RateCounter()
        observers = Observers(metrics.EngineMetrics(), counter)
        pools = Pools.connect(config.pools, observers, timers, metrics.redis_command_counter)
        lmstfy_layouts = await pools.serve_lmstfy_layouts(config.pools)
        # Tokens, limits, switches, rates and pushers live in the admin pool's own Redis (the old one
        # while it migrates).
        admin = pools.own(config.admin_pool).redis
        names = pools.names()
        stores = TokenStore(admin, names), LimitStore(admin, names), PusherStore(admin, names)
        runtime = cls(config, pools, *stores, RateStore(admin, counter))
        lmstfy_admin = _LmstfyAdmin(runtime.tokens, runtime.limits)
        if lmstfy_layouts and not pools.lmstfy_unsure:
            await lmstfy_admin.adopt()
        await runtime.limits.start()
        runtime.access_log_switch = switches.access_log(admin, config.server.access_log)
        runtime.access_log_switch.start()
        if run_pumps:
            runtime.collector = metrics.Collector(pools)
            runtime.flusher = metrics.Flusher()
            runtime.health = [Health(engine) for engine in pools.engines()]
            runtime.pumps = [Pump(engine, timers[engine.pool]) for engine in pools.engines()]
            runtime.schedulers = [Scheduler(engine) for engine in pools.engines()]
            runtime.push = PushManager(pools, runtime.pushers, config.push)  # told of every configuration change
            await runtime.push.start()
            runtime.background = [runtime.flusher, runtime.collector, runtime.rates, *runtime.health, *runtime.pumps]
            movers = [LmstfyMover(f, lmstfy_admin.adopt, f.pool in pools.lmstfy_unsure) for f in lmstfy_layouts]
            runtime.background += [*runtime.schedulers, *movers, runtime.pushers]
            for part in runtime.background:
                part.start()
        return runtime

    async def stop_waiting(self) -> None:
        """Answers every waiting long-poll now and stops pushing; the first step of a graceful stop."""
        if self.push is not None:
            await self.push.stop()  # its long-polls would otherwise start again at once
        for engine in self.pools.engines():
            await engine.stop_waiting()

    async def stop(self) -> None:
        await self.limits.stop()
        if self.access_log_switch is not None:
            await self.access_log_switch.stop()
        for part in reversed(self.background):
            await part.stop()
        if self.push is not None:
            await self.push.stop()
        await self.pools.close()
        metrics.flush()  # what was counted since the flusher's last turn (or with no flusher at all)


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
