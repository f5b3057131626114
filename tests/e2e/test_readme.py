"""The README's first examples run as written: a newcomer copies them into a shell.

The blocks are read from README.md itself; only the server's address changes (the test's server
listens on free ports, the README's on 7777/7778): in the text where the block spells it, and
through the environment variables the commands read where it does not (LMSTFY_ADMIN, LMSTFY_URL).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from benchmarks.harness.lmstfy_servers import Server

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


def shell_blocks_after(heading: str) -> list[str]:
    text = (ROOT / "README.md").read_text()
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start)
    return re.findall(r"```sh\n(.*?)```", text[start:end], re.DOTALL)


def as_run_here(block: str, server: Server) -> str:
    data = server.data_url.removeprefix("http://")
    block = block.replace("localhost:7777", data).replace("127.0.0.1:7777", data)
    return block.replace(".venv/bin/", f"{VENV_BIN}/")


def test_the_worker_in_five_lines_and_the_client_example_run_as_written(tmp_path: Path) -> None:
    worker, client = shell_blocks_after("### A worker in five lines")
    assert len(worker.strip().splitlines()) == 5
    with Server(tmp_path / "server") as server:
        server.start()
        env = {**os.environ, "LMSTFY_ADMIN": server.admin_url, "LMSTFY_URL": server.data_url}
        work = tmp_path / "work"
        work.mkdir()
        script = as_run_here(worker + client, server)
        done = subprocess.run(
            ["bash", "-e", "-c", script], cwd=work, env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "closing close order 43\n" in done.stdout, done.stdout + done.stderr
        assert re.search(r"^\S+ b'close order 44'$", done.stdout, re.MULTILINE), done.stdout + done.stderr
