"""Everything one server process holds while it runs: pools, tokens, pumps.

Built once from the Config and handed to the web apps explicitly (no module
globals), so tests can build as many as they need.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lmstfy_py.admin.tokens import TokenStore
from lmstfy_py.config import Config
from lmstfy_py.store.pools import Pools
from lmstfy_py.store.pump import Pump


@dataclass
class Runtime:
    config: Config
    pools: Pools
    tokens: TokenStore
    pumps: list[Pump] = field(default_factory=list)

    @classmethod
    async def start(cls, config: Config, run_pumps: bool = True) -> Runtime:
        pools = Pools.connect(config.pools)
        admin = pools.get(config.admin_pool)
        runtime = cls(config, pools, TokenStore(admin.redis, pools.names()))
        if run_pumps:
            runtime.pumps = [Pump(engine) for engine in pools.engines()]
            for pump in runtime.pumps:
                pump.start()
        return runtime

    async def stop(self) -> None:
        for pump in self.pumps:
            await pump.stop()
        await self.pools.close()
