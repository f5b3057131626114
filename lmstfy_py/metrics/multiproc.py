"""The multiprocess directory: where every worker process writes its samples.

prometheus-client's multiprocess mode keeps each process's samples in files of one directory;
a scrape merges the files of all of them. `server.run` makes a fresh directory before it forks
the workers and removes it at exit; a process that never called it (tests, embedding) makes a
private one on first use. Either way the directory must be chosen before the first sample is
written.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import glob
import os
import shutil
import tempfile

from prometheus_client import values

ENV = "PROMETHEUS_MULTIPROC_DIR"
DIR_PREFIX = "lmstfy-py-metrics-"

_directory: str | None = None
_directory_lock: int | None = None  # fd of the directory, flocked while this server lives


def new_directory() -> str:
    """A fresh directory for this server's metrics, used by this process and the workers it forks.

    Called by server.run before anything is measured; `remove_directory` at exit. The directory
    itself stays flocked while the server (any of its processes) lives: that tells a later
    server it is in use, and systemd-tmpfiles not to age it out.
    """
    global _directory, _directory_lock
    _remove_stale_directories()
    path = tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-")
    _directory_lock = _flocked_directory(path)
    os.environ[ENV] = path  # for anything else in the process that reads prometheus-client's variable
    # prometheus-client picks its value class when imported: switch it to files in `path`.
    # A series made before this call would keep writing where it was: server.run calls it first.
    values.ValueClass = values.MultiProcessValue()
    _directory = path
    return path


def directory() -> str:
    """This process's metrics directory; a private one, removed at exit, if server.run made none."""
    if _directory is None:
        path = new_directory()
        atexit.register(remove_directory, path, os.getpid())
    assert _directory is not None
    return _directory


def remove_directory(path: str, owner_pid: int | None = None) -> None:
    # A forked worker must not remove the directory its siblings still write to.
    if owner_pid is None or owner_pid == os.getpid():
        shutil.rmtree(path, ignore_errors=True)


def _flocked_directory(path: str) -> int | None:
    """An fd of the directory holding an exclusive flock on it; None if another process holds one."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _remove_stale_directories() -> None:
    """Removes the directories of servers that died without cleaning up (kill -9).

    Stale means unlocked and its owner (the pid in its name) gone: either alone could be
    wrong, for a directory a server is creating this instant or one from another pid namespace.
    """
    for path in glob.glob(os.path.join(tempfile.gettempdir(), DIR_PREFIX + "*")):
        owner = os.path.basename(path).removeprefix(DIR_PREFIX).split("-", 1)[0]
        if not owner.isdigit() or _alive(int(owner)):
            continue
        with contextlib.suppress(OSError):
            fd = _flocked_directory(path)
            if fd is not None:
                shutil.rmtree(path, ignore_errors=True)
                os.close(fd)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True
