"""Process metrics (`process_cpu_seconds_total`, `process_resident_memory_bytes`, ...) of every worker.

lmstfy's Go client exports its one process's; prometheus-client's ProcessCollector reads /proc
of one pid, and in multiprocess mode it would describe only the worker that answers a scrape.
So each server process registers itself here (a file `process-<worker>` in the metrics
directory holding its pid and start time) and a scrape reads /proc of every registered process
still alive: the same families, one series per worker, labelled `worker` ("0", "1", ...).
A process that is gone (its file left by a kill -9, or its pid reused) is skipped.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import os
from collections.abc import Iterator

from prometheus_client.metrics_core import Metric
from prometheus_client.process_collector import ProcessCollector

from lmstfy_py.metrics.multiproc import directory

FILE_PREFIX = "process-"
WORKER_LABEL = "worker"


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22); None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def register(worker: str) -> None:
    """Makes this process's metrics part of every scrape, labelled worker=`worker`."""
    pid = os.getpid()
    path = os.path.join(directory(), FILE_PREFIX + worker)
    with open(path + ".tmp", "w") as file:
        file.write(f"{pid} {_start_time(pid) or ''}")
    os.replace(path + ".tmp", path)  # a scrape never reads half a file


def _registered() -> Iterator[tuple[str, int]]:
    for path in sorted(glob.glob(os.path.join(directory(), FILE_PREFIX + "*"))):
        if path.endswith(".tmp"):
            continue
        with contextlib.suppress(OSError, ValueError):
            with open(path) as file:
                pid_text, _, started = file.read().partition(" ")
            pid = int(pid_text)
            if started and _start_time(pid) == started:
                yield os.path.basename(path).removeprefix(FILE_PREFIX), pid


def families() -> list[Metric]:
    """process_* families with one series per live registered process."""
    merged: dict[str, Metric] = {}
    for worker, pid in _registered():
        for family in ProcessCollector(namespace="", pid=functools.partial(int, pid), registry=None).collect():
            target = merged.setdefault(family.name, Metric(family.name, family.documentation, family.type))
            for sample in family.samples:
                target.add_sample(sample.name, {**sample.labels, WORKER_LABEL: worker}, sample.value)
    return list(merged.values())
