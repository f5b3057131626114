"""Everything one server process holds while it runs: pools, tokens, pumps.

Built once from the Config and handed to the web apps explicitly (no module
globals), so tests can build as many as they need.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lmstfy_py import metrics
from lmstfy_py.admin import switches
from lmstfy_py.admin.limits import LimitStore
from lmstfy_py.admin.rates import RateCounter, RateStore
from lmstfy_py.admin.switches import Switch
from lmstfy_py.admin.tokens import TokenStore
from lmstfy_py.config import Config
from lmstfy_py.store.engine import TimerSignal
from lmstfy_py.store.health import Health
from lmstfy_py.store.observers import Observers
from lmstfy_py.store.pools import Pools
from lmstfy_py.store.pump import Pump


@dataclass
class Runtime:
    config: Config
    pools: Pools
    tokens: TokenStore
    limits: LimitStore
    rates: RateStore  # publish and consume counts per queue and minute, for the dashboard
    pumps: list[Pump] = field(default_factory=list)
    health: list[Health] = field(default_factory=list)  # one check per pool; they log outages
    collector: metrics.Collector | None = None  # refreshes the size and Redis gauges
    # Switched at run time by POST /accesslog on any process (admin/switches.py).
    access_log_switch: Switch | None = None

    @property
    def access_log(self) -> bool:
        return self.access_log_switch.on if self.access_log_switch else self.config.server.access_log

    @classmethod
    async def start(cls, config: Config, run_pumps: bool = True) -> Runtime:
        """Connects the pools; with `run_pumps` also starts the background loops (timer pumps,
        health checks, metrics collector, rate flush), which tests of the web layer alone go without."""
        # The wiring, in one place: every engine is counted by the metrics and the rate counter and
        # tells its pool's timer pump of the timers it adds.
        timers = {name: TimerSignal() for name in config.pools}
        counter = RateCounter()
        pools = Pools.connect(config.pools, Observers(metrics.EngineMetrics(), counter), timers)
        # Tokens, limits, switches and rates live in the admin pool's own Redis (the old one while it migrates).
        admin = pools.own(config.admin_pool).redis
        stores = TokenStore(admin, pools.names()), LimitStore(admin, pools.names()), RateStore(admin, counter)
        runtime = cls(config, pools, *stores)
        await runtime.limits.start()
        runtime.access_log_switch = switches.access_log(admin, config.server.access_log)
        runtime.access_log_switch.start()
        if run_pumps:
            runtime.collector = metrics.Collector(pools)
            runtime.collector.start()
            runtime.rates.start()
            runtime.health = [Health(engine) for engine in pools.engines()]
            runtime.pumps = [Pump(engine, timers[engine.pool]) for engine in pools.engines()]
            for check in runtime.health:
                check.start()
            for pump in runtime.pumps:
                pump.start()
        return runtime

    async def stop_waiting(self) -> None:
        """Answers every waiting long-poll now; the first step of a graceful stop."""
        for engine in self.pools.engines():
            await engine.stop_waiting()

    async def stop(self) -> None:
        await self.limits.stop()
        if self.access_log_switch is not None:
            await self.access_log_switch.stop()
        if self.collector is not None:
            await self.collector.stop()
        await self.rates.stop()
        for pump in self.pumps:
            await pump.stop()
        for check in self.health:
            await check.stop()
        await self.pools.close()
