#!/usr/bin/env python3
"""Where a late due job's time goes: bench_timer_handover's run, with its stages timed.

Runs in one process the same due jobs, consumes and (with --load) half-capacity publish load as
`benchmarks.bench_timer_handover`, wrapping (monkeypatching, in this process only) the pump loop,
the pump script call and the auto-pipelined connection to time each stage of every handed job:

- due->sent: from the job's due time until the pump script that moved it was sent, split by
  whether the pump was busy at the due time (in a step: serving, its index bookkeeping, the
  sweep) or asleep (then "lag": how late that step's planned wake-up came);
- sent->flushed: the script waiting in the auto-pipelined client's buffer for the loop turn that
  writes it ("ahead": the commands in flight before it on that connection);
- flushed->read: Redis (the commands ahead in the pipeline, the script, the fsync) and the loop
  reaching the read;
- read->resumed: the pump coroutine waiting for its turn after its reply was read;
- resumed->returned: the handover and the consume's own return to its caller.

"busy steps": each step's duration and its parts' (head: the index read; serve: the pump script;
serve+index: it with the index bookkeeping; sweep), count, p50, p99.
A loop-lag probe (a 1 ms sleep, again and again) measures the event loop's turns meanwhile.
Prints p50/p99 per stage (ms), idle then under load, per round and the median over rounds, and
"other_cores": the CPU the rest of the machine used meanwhile (other work than the round's child
and Redis, in cores; /proc/stat), since this VM is shared.

    .venv/bin/python -m benchmarks.timer_stages --trees ../main . --jobs 200 --pairs 3
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import json
import os
import resource
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_timer_handover import due_round, main_of, percentile, rig, run_tree

STAGES = (
    "late",
    "due->sent",
    "due->sent, pump busy at due",
    "due->sent, pump asleep at due",
    "lag",
    "sent->flushed",
    "flushed->read",
    "read->resumed",
    "resumed->returned",
)
_in_pump: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("in_pump", default=None)


def instrument() -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """Wraps the pump's step, its script call and the pipelined wire; returns (handed job -> its
    pump call's stamps, every step's stamps)."""
    handed: dict[str, dict[str, Any]] = {}
    steps: list[dict[str, Any]] = []
    _wrap_steps(steps)
    _wrap_wire()
    _wrap_hand_over(handed)
    return handed, steps


def _timed(name: str, method: Any) -> Any:
    async def wrapper(self: Any, *args: Any) -> Any:
        at = time.time() * 1000
        try:
            return await method(self, *args)
        finally:
            stamp = _in_pump.get()
            if stamp is not None:
                stamp.setdefault("parts", []).append((name, at, time.time() * 1000))

    return wrapper


def _wrap_steps(steps: list[dict[str, Any]]) -> None:
    from lmstfy_py.store import due_index, pump

    step = due_index.DueIndexLoop._step

    async def timed_step(self: Any) -> float:
        stamp = {"start": time.time() * 1000, "planned": self._planned_ms}
        steps.append(stamp)
        _in_pump.set(stamp)
        try:
            return float(await step(self))
        finally:
            stamp["end"] = time.time() * 1000

    loop = due_index.DueIndexLoop
    loop._step = timed_step  # type: ignore[method-assign]
    loop._index_head = _timed("head", loop._index_head)  # type: ignore[method-assign]
    loop.sweep = _timed("sweep", loop.sweep)  # type: ignore[method-assign]
    loop.serve_namespace = _timed("serve+index", loop.serve_namespace)  # type: ignore[method-assign]
    pump.Pump.serve = _timed("serve", pump.Pump.serve)  # type: ignore[method-assign]


def _wrap_wire() -> None:
    """Stamps the pump's script commands: sent, written (flushed), reply read."""
    from lmstfy_py.store import pipelined

    wire = pipelined._Wire
    send, flush, received = wire.send, wire._flush, wire.data_received
    tracked: dict[Any, dict[str, Any]] = {}

    def timed_send(self: Any, packed: bytes) -> Any:
        future = send(self, packed)
        call = _in_pump.get()
        if call is not None and b"EVALSHA" in packed[:40]:
            call["sent"] = time.time() * 1000
            call["ahead"] = len(self.waiting) - 1
            tracked[future] = call
        return future

    def timed_flush(self: Any) -> None:
        now = time.time() * 1000
        for call in tracked.values():
            call.setdefault("flushed", now)
        flush(self)

    def timed_received(self: Any, data: bytes) -> None:
        now = time.time() * 1000
        received(self, data)
        for future in [f for f in tracked if f.done()]:
            tracked.pop(future)["read"] = now

    wire.send = timed_send  # type: ignore[method-assign]
    wire._flush = timed_flush  # type: ignore[method-assign]
    wire.data_received = timed_received  # type: ignore[method-assign]


def _wrap_hand_over(handed: dict[str, dict[str, Any]]) -> None:
    from lmstfy_py.store import namespace_ops

    hand_over = namespace_ops.NamespaceOps._hand_over

    async def timed_hand_over(self: Any, ns: str, waiters: Any, reserved_lists: Any, *rest: Any) -> None:
        call = _in_pump.get()
        if call is not None:
            stamp = dict(call, resumed=time.time() * 1000, step=call)
            for reserved in reserved_lists:
                for r in reserved:
                    handed[bytes(r.job_id).decode()] = stamp
            for key in ("sent", "flushed", "read", "ahead"):
                call.pop(key, None)  # the next pump call of this step stamps its own
        await hand_over(self, ns, waiters, reserved_lists, *rest)

    namespace_ops.NamespaceOps._hand_over = timed_hand_over  # type: ignore[method-assign]


def stages(due: float, returned: float, stamp: dict[str, Any] | None, steps: list[dict[str, Any]]) -> dict[str, float]:
    """One consumed job's stages (ms); only its lateness when it was not handed over by the pump."""
    row = {"late": returned - due}
    if stamp is None or "read" not in stamp:
        return row
    at = steps.index(stamp["step"])
    busy = stamp["start"] <= due or (at > 0 and steps[at - 1].get("end", 0) > due)
    row["due->sent"] = stamp["sent"] - due
    row["due->sent, pump busy at due" if busy else "due->sent, pump asleep at due"] = stamp["sent"] - due
    if stamp["planned"] != float("inf") and not busy:
        row["lag"] = stamp["start"] - stamp["planned"]
    row["sent->flushed"] = stamp["flushed"] - stamp["sent"]
    row["flushed->read"] = stamp["read"] - stamp["flushed"]
    row["read->resumed"] = stamp["resumed"] - stamp["read"]
    row["resumed->returned"] = returned - stamp["resumed"]
    row["ahead"] = stamp["ahead"]
    return row


async def lag_probe(stop: asyncio.Event, found: list[float]) -> None:
    while not stop.is_set():
        at = time.perf_counter()
        await asyncio.sleep(0.001)
        found.append((time.perf_counter() - at) * 1000 - 1.0)


async def child(url: str, jobs: int, consumers: int, load: bool) -> dict[str, Any]:
    handed, steps = instrument()
    running = await rig(url, load)
    lags: list[float] = []
    probing = asyncio.create_task(lag_probe(running.stop, lags))
    rows: list[dict[str, float]] = []

    def answered(job: Any, returned: float, due: int) -> None:
        rows.append(stages(due, returned, handed.get(job.job_id), steps))

    await due_round(running, jobs, consumers, answered)
    await probing
    rate = running.rate
    out: dict[str, Any] = {"load_rate": rate, "handed": sum(1 for r in rows if "due->sent" in r)}
    for stage in (*STAGES, "ahead"):
        values = [r[stage] for r in rows if stage in r]
        if values:
            out[stage] = (round(statistics.median(values), 2), round(percentile(values, 0.99), 2))
    durations: dict[str, list[float]] = {"step": [e["end"] - e["start"] for e in steps if "end" in e and "parts" in e]}
    for e in steps:
        for name, at, end in e.get("parts", ()):
            durations.setdefault(name, []).append(end - at)
    out["busy steps"] = {
        k: (len(v), round(statistics.median(v), 2), round(percentile(v, 0.99), 2)) for k, v in durations.items()
    }
    out["probe"] = (round(statistics.median(lags), 2), round(percentile(lags, 0.99), 2))
    # The stages of the late jobs (the slowest 5 %): where their time went, as medians.
    late = sorted(rows, key=lambda r: r["late"])[-max(1, len(rows) // 20) :]
    out["late5%"] = {
        s: round(statistics.median([r[s] for r in late if s in r]), 2) for s in STAGES if any(s in r for r in late)
    }
    return out


def busy_s() -> float:
    """CPU seconds this machine spent busy (all cores, steal excluded), from /proc/stat."""
    fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq = fields[:7]
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_child(tree: str, redis: Any, args: argparse.Namespace, load: bool) -> dict[str, Any]:
    """One round on `tree`'s code, with the CPU the rest of the machine used meanwhile ("other_cores":
    other work than this round's child and Redis, in cores)."""
    at, busy, redis_cpu = time.monotonic(), busy_s(), process_cpu_s(redis.pid)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    found = run_tree(__file__, tree, redis, args, load)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    ours = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
    ours += process_cpu_s(redis.pid) - redis_cpu
    found["other_cores"] = round((busy_s() - busy - ours) / (time.monotonic() - at), 2)
    return found


def summary(rounds: list[dict[str, Any]]) -> str:
    """Each stage's p50 and p99, medians over the rounds (ms), and the other work's median."""
    medians = {
        stage: [statistics.median(r[stage][i] for r in rounds if stage in r) for i in (0, 1)]
        for stage in (*STAGES, "probe")
        if any(stage in r for r in rounds)
    }
    return f"p50/p99 medians {json.dumps(medians)}, other cores {statistics.median(r['other_cores'] for r in rounds)}"


def main() -> None:
    main_of(__doc__, child, run_child, summary)


if __name__ == "__main__":
    main()
