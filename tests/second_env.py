"""Second Python environments for the tests: packages that cannot share ``.venv`` with tracehouse (an
older DuckDB, servers whose pins clash with Dagster's), each made once from a pinned requirements
file in ``tests/compat/`` under ``.venv-compat/`` and kept; a changed file or Python gets a new one.

The environment needs the package registry the first time; without it the test is skipped, saying so.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
COMPAT = REPO / "tests" / "compat"
VENVS = REPO / ".venv-compat"
# what pip says when it cannot reach the registry (then the test is skipped, not failed)
UNREACHABLE = ("NewConnectionError", "Max retries exceeded", "Temporary failure in name resolution",
               "Network is unreachable", "Connection refused", "ConnectTimeoutError", "ProxyError",
               "Read timed out", "Failed to establish a new connection")


def python_for(requirements: Path) -> Path:
    """The Python of the environment ``requirements`` pins, made on first use under a lock (parallel
    test runs share it)."""
    name = requirements.stem
    key = hashlib.sha256(requirements.read_bytes() + sys.version.encode()).hexdigest()[:12]
    venv = VENVS / f"{name}-{key}"
    python, installed = venv / "bin" / "python", venv / "installed"
    VENVS.mkdir(exist_ok=True)
    with open(VENVS / f"{name}-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if installed.is_file():
            return python
        shutil.rmtree(venv, ignore_errors=True)  # a half-made one (a killed run)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
        pip = subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--retries", "1",
             "--timeout", "30", "-r", str(requirements)],
            capture_output=True, text=True)
        if pip.returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
            said = pip.stdout + pip.stderr
            if any(marker in said for marker in UNREACHABLE):
                pytest.skip(f"pip could not reach the package registry to install {requirements.name}: "
                            f"{said.strip().splitlines()[-1]}")
            raise AssertionError(f"pip install -r {requirements} failed:\n{said}")
        installed.write_text(requirements.read_text())
        return python
