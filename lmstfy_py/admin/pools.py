"""What every store of the admin Redis checks first: that the pool a request names is one the config has."""

from __future__ import annotations

from lmstfy_py.errors import InvalidParameter


class PoolChecked:
    """A store keyed by pool; `pools` are the config's, a request naming another is the API's 400."""

    pools: set[str]

    def _check_pool(self, pool: str) -> None:
        if pool not in self.pools:
            raise InvalidParameter("pool not found")
