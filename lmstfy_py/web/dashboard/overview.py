"""The overview (GET /ui): a pool's namespaces and queues with their counts, paused state and
publish/consume rates over the last hour, totals per namespace and for the pool."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from starlette.requests import Request
from starlette.responses import Response

from lmstfy_py.admin.rates import Rates
from lmstfy_py.store.jobstore import JobStore
from lmstfy_py.types import QueueStats
from lmstfy_py.web.dashboard import charts
from lmstfy_py.web.dashboard.render import NavItem, page, pool_of, runtime_of, store_of, ui
from lmstfy_py.web.middleware import route

MAX_QUEUES = 500  # rows one page reads and shows; a namespace filter narrows them
NAV = NavItem("Overview", "/ui")


@dataclass(frozen=True, slots=True)
class QueueRow:
    queue: str
    stats: QueueStats
    rates: Rates


@dataclass
class NamespaceRow:
    name: str
    tokens: int
    queues: list[QueueRow] = field(default_factory=list)

    def total(self, state: str) -> int:
        return sum(getattr(row.stats, state) for row in self.queues)

    @property
    def paused(self) -> int:
        return sum(row.stats.paused for row in self.queues)


async def _names(request: Request, store: JobStore, pool: str) -> list[str]:
    """Namespaces that ever had a job and namespaces that have tokens, as GET /namespaces lists them."""
    with_tokens = await runtime_of(request).tokens.namespaces(pool)
    return sorted(set(await store.namespaces()) | set(with_tokens))


async def _queue_names(store: JobStore, namespaces: list[str]) -> tuple[list[tuple[str, str]], bool]:
    """(namespace, queue) pairs, at most MAX_QUEUES; whether some were left out."""
    pairs: list[tuple[str, str]] = []
    for ns in namespaces:
        pairs += [(ns, queue) for queue in await store.queues(ns)]
        if len(pairs) > MAX_QUEUES:
            return pairs[:MAX_QUEUES], True
    return pairs, False


async def overview(request: Request) -> Response:
    pool, store, runtime = pool_of(request), store_of(request), runtime_of(request)
    only = request.query_params.get("ns") or None
    namespaces = [ns for ns in await _names(request, store, pool) if only is None or ns == only]
    pairs, cut = await _queue_names(store, namespaces)
    # Concurrent calls: a standalone pool's pipelined client sends them to Redis in one write.
    stats = await asyncio.gather(*(store.stats(ns, queue) for ns, queue in pairs))
    history = await runtime.rates.history(pool)
    token_counts = await asyncio.gather(*(runtime.tokens.list_tokens(pool, ns) for ns in namespaces))
    rows = {ns: NamespaceRow(ns, len(tokens)) for ns, tokens in zip(namespaces, token_counts, strict=True)}
    for (ns, queue), found in zip(pairs, stats, strict=True):
        rows[ns].queues.append(QueueRow(queue, found, history.of(ns, queue)))
    total = history.total() if only is None else history.of_namespace(only)
    context = {
        "namespaces": list(rows.values()),
        "only": only,
        "cut": cut,
        "max_queues": MAX_QUEUES,
        "queue_count": len(pairs),
        "totals": {
            state: sum(r.total(state) for r in rows.values()) for state in ("ready", "delayed", "reserved", "dead")
        },
        "chart": charts.rate_chart(total, "pool-rates"),
        "sparkline": charts.sparkline,
        "rates": total,
    }
    return await page(request, "overview.html", context)


ROUTES = [route("/ui", "GET", ui(overview))]
