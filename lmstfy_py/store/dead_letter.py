"""An Engine's dead-letter operations (a part of Engine, store/engine.py).

A pool with a Layout (store/layout.py) first moves the other layout's dead jobs of the queue
behind ours, so that every operation sees one dead letter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lmstfy_py.errors import NotFound
from lmstfy_py.store import keys
from lmstfy_py.store.contracts.upkeep import (
    DeadKeys,
    DeadPageArgs,
    DeadRow,
    DeleteDeadArgs,
    DeleteDeadOneArgs,
    DeleteDeadOneKeys,
    RespawnArgs,
    RespawnKeys,
    RespawnOneArgs,
    RespawnOneKeys,
)
from lmstfy_py.store.engine_base import CHUNK, EngineBase, as_int, as_text, now_ms, queue_keys
from lmstfy_py.store.jobdata import decode_data
from lmstfy_py.types import DeadJob, DeadLetterHead, DeadPage


class DeadLetterOps(EngineBase):
    async def _adopt_dead(self, ns: str, queue: str) -> None:
        if self.layout is not None:
            await self.layout.adopt_dead(ns, queue)

    async def dead_letter(self, ns: str, queue: str) -> DeadLetterHead:
        await self._adopt_dead(ns, queue)
        pipe = self.redis.pipeline(transaction=False)
        pipe.llen(keys.dead(ns, queue))
        pipe.lindex(keys.dead(ns, queue), -1)
        size, head = await pipe.execute()  # bytes: no decode_responses
        return DeadLetterHead(int(size), keys.unpack_element(head)[1] if head else "")

    async def dead_letter_size(self, ns: str, queue: str) -> int:
        await self._adopt_dead(ns, queue)
        return int(await self.redis.llen(keys.dead(ns, queue)))

    async def dead_letter_ids(self, ns: str, queue: str, limit: int) -> list[str]:
        """The oldest `limit` dead job ids, oldest first."""
        await self._adopt_dead(ns, queue)
        elements = await self.redis.lrange(keys.dead(ns, queue), -limit, -1)
        return [keys.unpack_element(e)[1] for e in reversed(elements) if isinstance(e, bytes)]

    async def dead_page(self, ns: str, queue: str, limit: int, after: str | None) -> DeadPage:
        """Up to `limit` dead jobs, oldest first, from the one after `after` (None: the oldest)."""
        await self._adopt_dead(ns, queue)
        found = await self.scripts.dead_page(
            self.script_client,
            DeadKeys(keys.dead(ns, queue)),
            DeadPageArgs(keys.job(ns, queue, ""), limit, after or ""),
        )
        if found.more == -1:
            raise NotFound("the job `after` names is not in the dead letter")
        jobs = [_dead_job(row) for row in found.rows]
        return DeadPage(jobs, jobs[-1].job_id if found.more and jobs else None)

    async def respawn(self, ns: str, queue: str, limit: int, ttl_ms: int) -> int:
        """Moves up to `limit` oldest dead jobs back to ready with one try and a fresh ttl."""
        await self._adopt_dead(ns, queue)
        call_keys = RespawnKeys(keys.dead(ns, queue), *queue_keys(ns, queue))
        prefix = keys.job(ns, queue, "")
        count = await _in_chunks(
            limit, lambda n: self.scripts.respawn(self.script_client, call_keys, RespawnArgs(n, ttl_ms, prefix))
        )
        self.observer.respawned(self.pool, ns, queue, count)
        return count

    async def respawn_one(self, ns: str, queue: str, job_id: str, ttl_ms: int, tries: int, delay_ms: int) -> None:
        """One dead job back to ready (after `delay_ms`) with `tries` and a fresh ttl. 404 when not dead."""
        await self._adopt_dead(ns, queue)
        due = now_ms() + delay_ms if delay_ms else 0
        call_keys = RespawnOneKeys(
            keys.job(ns, queue, job_id),
            keys.dead(ns, queue),
            keys.timer(ns),
            *queue_keys(ns, queue),
            keys.tombstone(ns, queue, job_id),
        )
        args = RespawnOneArgs(ns, queue, job_id, ttl_ms, tries, due)
        if not await self.scripts.respawn_one(self.script_client, call_keys, args):
            raise NotFound("job not found in the dead letter")
        if due:
            await self._scheduled(ns, due)
        self.observer.respawned(self.pool, ns, queue, 1)

    async def delete_dead(self, ns: str, queue: str, limit: int) -> int:
        """Deletes up to `limit` oldest dead jobs with their data."""
        await self._adopt_dead(ns, queue)
        prefix = keys.job(ns, queue, "")
        return await _in_chunks(
            limit,
            lambda n: self.scripts.delete_dead(
                self.script_client, DeadKeys(keys.dead(ns, queue)), DeleteDeadArgs(n, prefix)
            ),
        )

    async def delete_dead_one(self, ns: str, queue: str, job_id: str) -> None:
        """Deletes one dead job with its data. 404 when it is not in the dead letter."""
        await self._adopt_dead(ns, queue)
        call_keys = DeleteDeadOneKeys(keys.job(ns, queue, job_id), keys.dead(ns, queue))
        if not await self.scripts.delete_dead_one(self.script_client, call_keys, DeleteDeadOneArgs(job_id)):
            raise NotFound("job not found in the dead letter")


async def _in_chunks(limit: int, step: Callable[[int], Any]) -> int:
    total = 0
    while total < limit:
        want = min(CHUNK, limit - total)
        done = int(await step(want))
        total += done
        if done < want:
            break
    return total


def _dead_job(row: DeadRow) -> DeadJob:
    body, _, trace = decode_data(row.data) if row.data is not None else (b"", None, None)
    attempts, error, died = as_int(row.attempts) or 0, as_text(row.error), as_int(row.died)
    return DeadJob(row.job_id.decode(), body, attempts, error, died, trace)
