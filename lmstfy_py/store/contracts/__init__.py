"""Every Lua step of the store, each called through its contract (jobs.py, upkeep.py)."""

from __future__ import annotations

from lmstfy_py.store.contracts import jobs, upkeep


class Scripts:
    """One attribute per lua/*.lua (but _lib.lua, which each of them starts with, and _lmstfy.lua)."""

    publish = jobs.PUBLISH
    reserve = jobs.RESERVE
    ack = jobs.ACK
    release = jobs.RELEASE
    touch = jobs.TOUCH
    bury = jobs.BURY
    complete = jobs.COMPLETE
    wait_mark = jobs.WAIT_MARK
    settings_put = jobs.SETTINGS_PUT
    peek = jobs.PEEK
    next_jobs = jobs.NEXT_JOBS
    job_state = jobs.JOB_STATE
    size = jobs.SIZE
    stats = jobs.STATS
    promote = jobs.PROMOTE
    pause = jobs.PAUSE
    lmstfy_reserve = jobs.LMSTFY_RESERVE
    destroy = upkeep.DESTROY
    dead_page = upkeep.DEAD_PAGE
    respawn = upkeep.RESPAWN
    respawn_one = upkeep.RESPAWN_ONE
    delete_dead = upkeep.DELETE_DEAD
    delete_dead_one = upkeep.DELETE_DEAD_ONE
    purge_timer = upkeep.PURGE_TIMER
    forget_namespace = upkeep.FORGET_NAMESPACE
    pump = upkeep.PUMP
    schedule_put = upkeep.SCHEDULE_PUT
    schedule_delete = upkeep.SCHEDULE_DELETE
    lmstfy_dead = upkeep.LMSTFY_DEAD
    lmstfy_pump = upkeep.LMSTFY_PUMP
    lmstfy_drop = upkeep.LMSTFY_DROP
    schedule_fire = upkeep.SCHEDULE_FIRE

    @classmethod
    def load(cls) -> Scripts:
        return cls()
