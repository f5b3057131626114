#!/usr/bin/env python3
"""SIGKILL the embedded Redis alone under write load, again and again: are acknowledged writes lost?

The embedded Redis's own settings (lmstfy_py.store.embedded.EmbeddedRedis, `--fsync` policy)
in a temporary data dir. `--clients` threads RPUSH unique values and remember every one Redis
answered; at a random moment the Redis gets SIGKILL and is started again on the same data dir
(as the server's watcher does), and each value answered before the kill must be in the list.
With appendfsync everysec the kernel keeps what Redis wrote, but Redis may answer a write it
postponed while a background fsync runs (up to 2 s, on a slow disk): that is what this looks
for. `--disk-load` adds a thread writing and fsyncing 64 MiB chunks to the same disk, to make
the fsyncs slow. Prints the kills, the acknowledged writes and the lost ones; exits 1 on a loss.

    .venv/bin/python -m benchmarks.redis_kill_loss --fsync everysec --kills 40 [--disk-load]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent
from lmstfy_py.store.embedded import EmbeddedRedis  # noqa: E402

KEY = "acknowledged"
CHUNK = b"\0" * (1 << 20)


def push_until_error(url: str, client: int, acked: list[str], lock: threading.Lock) -> None:
    with redis.Redis.from_url(url, socket_timeout=5) as conn:
        for i in range(sys.maxsize):
            value = f"{client}-{i}"
            try:
                conn.rpush(KEY, value)
            except redis.RedisError:
                return  # the kill
            with lock:
                acked.append(value)


def load_disk(path: Path, stop: threading.Event) -> None:
    while not stop.is_set():
        with open(path, "wb") as file:
            for _ in range(64):
                file.write(CHUNK)
            file.flush()
            os.fsync(file.fileno())
    path.unlink(missing_ok=True)


def one_kill(embedded: EmbeddedRedis, url: str, clients: int, window: tuple[float, float]) -> tuple[int, int]:
    """Load, kill at a random moment, restart: (acknowledged, lost) of this round."""
    acked: list[str] = []
    lock = threading.Lock()
    threads = [threading.Thread(target=push_until_error, args=(url, n, acked, lock)) for n in range(clients)]
    for thread in threads:
        thread.start()
    time.sleep(random.uniform(*window))
    assert embedded.pid is not None
    os.kill(embedded.pid, signal.SIGKILL)
    for thread in threads:
        thread.join()
    while embedded.running:  # its sockets close before it can be reaped
        time.sleep(0.001)
    embedded.wait_ready(embedded.respawn_sync())
    with redis.Redis.from_url(url) as conn:
        kept = {value.decode() for value in conn.lrange(KEY, 0, -1)}
        conn.delete(KEY)
    return len(acked), sum(1 for value in acked if value not in kept)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--fsync", choices=["everysec", "always"], default="everysec")
    parser.add_argument("--kills", type=int, default=40)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--disk-load", action="store_true", help="fsync 64 MiB chunks to the same disk meanwhile")
    parser.add_argument("--dir", help="where the data dir goes (default: the temporary directory)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        embedded = EmbeddedRedis(Path(tmp) / "data", fsync=args.fsync)
        url = embedded.start_sync()
        stop = threading.Event()
        loader = threading.Thread(target=load_disk, args=(Path(tmp) / "disk-load", stop))
        if args.disk_load:
            loader.start()
        acked = lost = rounds_with_loss = 0
        try:
            for kill in range(1, args.kills + 1):
                round_acked, round_lost = one_kill(embedded, url, args.clients, (0.3, 2.5))
                acked, lost = acked + round_acked, lost + round_lost
                rounds_with_loss += bool(round_lost)
                if round_lost:
                    print(f"kill {kill}: {round_lost} of {round_acked} acknowledged writes lost", flush=True)
        finally:
            stop.set()
            if loader.is_alive():
                loader.join()
            embedded.stop_sync()
    load = ", disk load" if args.disk_load else ""
    print(f"fsync {args.fsync}{load}: {args.kills} kills, {acked:,} acknowledged writes, {lost} lost", end="")
    print(f" ({rounds_with_loss} kills lost some)")
    sys.exit(1 if lost else 0)


if __name__ == "__main__":
    main()
