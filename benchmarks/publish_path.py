#!/usr/bin/env python3
"""Which of lmstfy_py's files a publish passes (docs/ARCHITECTURE.md, "The life of a publish").

One PUT /api/{ns}/{queue} through the data port's app as `lmstfy-py serve` serves it (the data
app behind web/hot.py's dispatcher; `--plain`: the data app alone), in process, traced with
sys.setprofile: every
lmstfy_py file with a frame in the request's own task (background loops left out), those entered
before the step (FCALL) is written, and the files on the call stack when it is.

    .venv/bin/python -m benchmarks.publish_path --redis-url redis://127.0.0.1:6379 [--plain] [--delay S]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import httpx

import lmstfy_py
from lmstfy_py.config import Config, PoolConfig
from lmstfy_py.runtime import Runtime
from lmstfy_py.web import create_data_app
from lmstfy_py.web.hot import HotRoutes

ROOT = Path(lmstfy_py.__file__).parent
SEND = ("pipelined.py", "send")  # where the step (FCALL) is handed to the connection


def _ours(frame: FrameType) -> str | None:
    path = Path(frame.f_code.co_filename)
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else None


def _stack(frame: FrameType | None) -> list[str]:
    files: list[str] = []
    while frame is not None:
        if (name := _ours(frame)) and name not in files:
            files.append(name)
        frame = frame.f_back
    return files[::-1]


async def trace(redis_url: str, plain: bool, delay: int = 0) -> tuple[list[str], list[str], list[str]]:
    """(every file with a frame, those before the send, those on the stack at the send)."""
    runtime = await Runtime.start(Config(pools={"default": PoolConfig("default", url=redis_url)}))
    every: list[str] = []
    before: list[str] = []
    at_send: list[str] = []
    try:
        token = await runtime.tokens.create("default", "trace", "benchmarks.publish_path")
        app = create_data_app(runtime)
        transport = httpx.ASGITransport(app=app if plain else HotRoutes(app))
        async with httpx.AsyncClient(transport=transport, base_url="http://trace") as client:
            await client.put(
                f"/api/trace/q?token={token}&delay={delay}", content=b"warm"
            )  # caches filled, connection made
            task = asyncio.current_task()

            def profile(frame: FrameType, event: str, arg: Any) -> None:
                if event != "call" or asyncio.current_task() is not task or not (name := _ours(frame)):
                    return
                if name not in every:
                    every.append(name)
                if not at_send and name not in before:
                    before.append(name)
                if not at_send and (Path(name).name, frame.f_code.co_name) == SEND:
                    at_send.extend(_stack(frame))

            sys.setprofile(profile)
            try:
                answer = await client.put(f"/api/trace/q?token={token}&delay={delay}", content=b"traced")
            finally:
                sys.setprofile(None)
            answer.raise_for_status()
    finally:
        await runtime.stop()
    return every, before, at_send


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--plain", action="store_true", help="the data app alone, without web/hot.py")
    parser.add_argument("--delay", type=int, default=0, help="the traced job's delay, seconds")
    args = parser.parse_args()
    every, before, at_send = asyncio.run(trace(args.redis_url, args.plain, args.delay))
    print(f"{len(every)} files with a frame in the request's task: {', '.join(sorted(every))}")
    print(f"{len(before)} before the step is written: {', '.join(before)}")
    print(f"{len(at_send)} on the stack when it is: {' -> '.join(at_send)}")


if __name__ == "__main__":
    main()
