"""The package as someone installs it: built as an sdist and a wheel, installed into an environment
of its own (not the checkout's), it serves, and brings `lmstfy-py`, `token-cli` and the client.

The wheel is built from the sdist (what `python -m build` does), so a file missing from the sdist
(a Lua step, a template) fails here. The new environment gets the dependencies from this test
run's environment through a path file, so nothing is downloaded; lmstfy_py itself comes from the
wheel alone, which the test checks.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import tarfile
import venv
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from benchmarks.harness.lmstfy_servers import Server

ROOT = Path(__file__).resolve().parents[2]
SKIPPED_IN_COPY = shutil.ignore_patterns(".venv", ".git", "lmstfy-data", "__pycache__", "*.egg-info", "build", "dist")
# What the server reads from its own package at run time: each must ship in both archives.
PACKAGE_DATA = ("lmstfy_py/store/lua/", "lmstfy_py/admin/lua/", "lmstfy_py/web/dashboard/templates/")
TIMEOUT = 120.0


@dataclass(frozen=True)
class Installed:
    sdist: Path
    wheel: Path
    bin: Path

    def run(self, program: str, *args: str) -> subprocess.CompletedProcess[str]:
        # Not from the checkout: `python -c` would import lmstfy_py from its working directory.
        command = [str(self.bin / program), *args]
        done = subprocess.run(command, cwd=self.bin, capture_output=True, text=True, timeout=TIMEOUT, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        return done


class InstalledServer(Server):
    """A server started by the installed `lmstfy-py` script instead of the checkout's module."""

    def __init__(self, workdir: Path, program: Path) -> None:
        super().__init__(workdir)
        self.program = program

    def command(self, *more: str) -> list[str]:
        ours = super().command(*more)
        start = ours.index("serve")
        return [str(self.program), *ours[start:]]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    work = tmp_path_factory.mktemp("packaging")
    source = work / "source"
    shutil.copytree(ROOT, source, ignore=SKIPPED_IN_COPY)
    dist = work / "dist"
    build = [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(source)]
    built = subprocess.run(build, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert built.returncode == 0, built.stdout + built.stderr
    (sdist,) = dist.glob("lmstfy_py-*.tar.gz")
    (wheel,) = dist.glob("lmstfy_py-*.whl")
    env = work / "env"
    venv.EnvBuilder(with_pip=False).create(env)
    python = env / "bin" / "python"
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)]
    done = subprocess.run(install, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    # The dependencies: this run's site-packages on the path, after the environment's own (which
    # holds lmstfy_py); a path file does not run that directory's own path files, so the checkout's
    # editable install stays out.
    site = Path(
        subprocess.check_output(
            [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], text=True
        ).strip()
    )
    (site / "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    yield Installed(sdist, wheel, env / "bin")


def test_the_sdist_and_the_wheel_carry_the_package_data(installed: Installed) -> None:
    with tarfile.open(installed.sdist) as sdist:
        in_sdist = [name.partition("/")[2] for name in sdist.getnames()]  # below lmstfy_py-VERSION/
    with zipfile.ZipFile(installed.wheel) as wheel:
        in_wheel = wheel.namelist()
    for folder in PACKAGE_DATA:
        expected = {str(path.relative_to(ROOT)) for path in (ROOT / folder).iterdir() if path.is_file()}
        assert expected and expected <= set(in_sdist), folder
        assert expected <= set(in_wheel), folder
    entry_points = next(name for name in in_wheel if name.endswith("entry_points.txt"))
    with zipfile.ZipFile(installed.wheel) as wheel:
        scripts = wheel.read(entry_points).decode()
    assert "lmstfy-py = lmstfy_py.cli:main" in scripts and "token-cli = lmstfy_py.token_cli:main" in scripts


def test_the_installed_commands_run_from_the_installed_package(installed: Installed) -> None:
    assert installed.run("lmstfy-py", "--help").stdout.startswith("Usage: lmstfy-py")
    assert installed.run("token-cli", "--help").stdout.startswith("Usage: token-cli")
    where = installed.run("python", "-c", "import lmstfy_py.client, lmstfy_py.worker; print(lmstfy_py.__file__)")
    assert Path(where.stdout.strip()).is_relative_to(installed.bin.parent), where.stdout


def test_the_installed_package_serves_a_job_from_publish_to_ack(installed: Installed, tmp_path: Path) -> None:
    with InstalledServer(tmp_path, installed.bin / "lmstfy-py") as server:
        server.start()
        made = installed.run("token-cli", "--admin", server.admin_url, "create", "pkg", "--description", "packaging")
        token = made.stdout.strip()
        script = (
            "import sys\n"
            "from lmstfy_py.client import Client\n"
            "with Client(sys.argv[1], 'pkg', sys.argv[2]) as client:\n"
            "    client.publish('q', b'from the wheel')\n"
            "    job = client.consume('q', ttr=30, timeout=5)\n"
            "    client.ack('q', job.id)\n"
            "    print(job.data.decode(), client.size('q'))\n"
        )
        done = installed.run("python", "-c", script, server.data_url, token)
        assert done.stdout == "from the wheel 0\n"
        assert httpx.get(f"{server.admin_url}/ready", timeout=5).status_code == 200
