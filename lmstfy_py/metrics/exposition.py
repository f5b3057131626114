"""The exposition: every process's samples merged into Prometheus text format 0.0.4 (what lmstfy serves)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from lmstfy_py.metrics import process
from lmstfy_py.metrics.families import LMSTFY_PREFIX, REDIS_PREFIX, ROUTE_LABELS
from lmstfy_py.metrics.multiproc import directory

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True)
class _Sum:
    """A counter computed at scrape time: the sum of other samples, by some of their labels.

    Each costs nothing per request. A sum of counters read at any moments still only grows.
    """

    name: str
    doc: str
    sources: tuple[str, ...]  # sample names
    by: tuple[str, ...]


_PUBLISHED = (REDIS_PREFIX + "publish_queue_jobs_total",)
_CONSUMED = (REDIS_PREFIX + "consume_jobs_total", REDIS_PREFIX + "consume_multi_jobs_total")
_SUMS = (
    _Sum(REDIS_PREFIX + "publish_jobs", "jobs published", _PUBLISHED, ("pool",)),
    _Sum(REDIS_PREFIX + "pool_add_jobs", "jobs published", _PUBLISHED, ("pool",)),
    _Sum(REDIS_PREFIX + "queue_pop_jobs", "jobs consumed", _CONSUMED, ("pool",)),
    _Sum(REDIS_PREFIX + "pool_get_jobs", "jobs consumed", _CONSUMED, ("pool",)),
    _Sum(REDIS_PREFIX + "pool_delete_jobs", "ACKs", (REDIS_PREFIX + "job_ack_elapsed_ms_count",), ("pool",)),
    _Sum(
        "lmstfy_http_requests", "HTTP requests answered", ("lmstfy_http_request_duration_seconds_count",), ROUTE_LABELS
    ),
)


def exposition() -> bytes:
    """Every process's samples, merged, in Prometheus text format 0.0.4 (what lmstfy serves)."""
    families = list(MultiProcessCollector(None, path=directory()).collect())
    by_name: dict[str, list[Sample]] = defaultdict(list)
    for family in families:
        for sample in family.samples:
            by_name[sample.name].append(sample)
    families += [family for spec in _SUMS if (family := _summed(spec, by_name)) is not None]
    families += process.families()
    return "".join(_family_text(family) for family in sorted(families, key=lambda f: f.name)).encode()


def _summed(spec: _Sum, by_name: dict[str, list[Sample]]) -> Metric | None:
    totals: dict[tuple[str, ...], float] = defaultdict(float)
    for source in spec.sources:
        for sample in by_name.get(source, ()):
            totals[tuple(sample.labels.get(label, "") for label in spec.by)] += sample.value
    if not totals:
        return None  # like any other family: not shown before its first sample
    family = Metric(spec.name, spec.doc, "counter")
    for labels, value in totals.items():
        family.add_sample(spec.name + "_total", dict(zip(spec.by, labels, strict=True)), value)
    return family


def _family_text(family: Metric) -> str:
    name, samples = family.name, list(family.samples)
    if family.type == "counter":
        if name.startswith(LMSTFY_PREFIX):
            samples = [s._replace(name=name) for s in samples]  # the Go client adds no _total
        else:
            name += "_total"
    doc = family.documentation.replace("\\", r"\\").replace("\n", r"\n")
    lines = [f"# HELP {name} {doc}\n", f"# TYPE {name} {family.type}\n"]
    lines += [_sample_line(sample) for sample in sorted(samples, key=_sample_order)]
    return "".join(lines)


_SUFFIX_ORDER = {"_bucket": 0, "_count": 1, "_sum": 2}


def _sample_order(sample: Sample) -> tuple[Any, ...]:
    labels = sorted((k, v) for k, v in sample.labels.items() if k != "le")
    suffix = next((order for suffix, order in _SUFFIX_ORDER.items() if sample.name.endswith(suffix)), 0)
    return (labels, suffix, float(sample.labels.get("le", 0)))


def _sample_line(sample: Sample) -> str:
    labels = ",".join(f'{k}="{_escape(_le(v) if k == "le" else v)}"' for k, v in sorted(sample.labels.items()))
    return f"{sample.name}{{{labels}}} {floatToGoString(sample.value)}\n"


def _le(bound: str) -> str:
    """A bucket bound as Go writes it ("15", not "15.0"): Prometheus 2 stores le as text."""
    return bound[:-2] if bound.endswith(".0") else bound


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace('"', r"\"").replace("\n", r"\n")
