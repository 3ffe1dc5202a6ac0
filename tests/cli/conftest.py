"""Helpers for the CLI tests: run ``python -m matchsql`` as a subprocess or in a pty."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def cli_env(tmp_path: Path) -> dict[str, str]:
    """An environment that keeps history out of the user's home and the terminal simple."""
    env = dict(os.environ)
    env.update(
        MATCHSQL_HISTORY=str(tmp_path / "history"),
        PROMPT_TOOLKIT_NO_CPR="1",
        TERM="xterm",
        PYTHONPATH=str(ROOT),
        PYTHONFAULTHANDLER="1",
    )  # a crash prints its stack rather than nothing
    env.pop("MATCHSQL_TRACEBACK", None)
    return env


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The environment for a matchsql subprocess (see :func:`cli_env`)."""
    return cli_env(tmp_path)


@pytest.fixture
def run_cli(tmp_path: Path):
    """Run ``matchsql ARGS`` with optional stdin; returns the CompletedProcess."""

    def run(
        *args: str, stdin: str | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "matchsql", *args],
            input=stdin if stdin is not None else "",
            capture_output=True,
            text=True,
            env=cli_env(tmp_path),
            cwd=tmp_path,
            timeout=timeout,
        )

    return run
