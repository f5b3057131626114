"""Plain values passed between the web layer and the store."""

from __future__ import annotations

from dataclasses import dataclass

from lmstfy_py import ids


@dataclass(frozen=True, slots=True)
class NewJob:
    """One job to publish; times are milliseconds inside the engine."""

    body: bytes
    ttl_ms: int = 86_400_000  # 0 = lives forever
    delay_ms: int = 0
    tries: int = 1
    # None: an unversioned job id and no attributes stored (lmstfy without Enable-Job-Version).
    attributes: dict[str, str] | None = None


@dataclass(frozen=True, slots=True)
class Job:
    """A job as a consumer or a peek sees it."""

    namespace: str
    queue: str
    job_id: str
    body: bytes
    ttl: int  # seconds it has left, 0 = no expiry
    remain_tries: int
    attributes: dict[str, str] | None

    @property
    def elapsed_ms(self) -> int:
        return ids.elapsed_ms(self.job_id)


@dataclass(frozen=True, slots=True)
class DeadLetterHead:
    size: int
    head: str  # oldest dead job id, "" when empty
