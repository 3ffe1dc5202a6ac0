"""Live-stream tests: an isolated stream registry, and producers in real separate processes."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import matchsql
from matchsql.storage.catalog import Catalog
from matchsql.storage.shm_ring import W_EOS, W_HEAD_SEQ, Ring

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 60  # upper bound of any single wait in these tests


@pytest.fixture(autouse=True)
def runtime_dir(tmp_path, monkeypatch) -> Path:
    """Each test gets its own registry (and so its own segment names)."""
    directory = tmp_path / "runtime"
    monkeypatch.setenv("MATCHSQL_RUNTIME_DIR", str(directory))
    return directory


@pytest.fixture
def con():
    connection = matchsql.connect(demo=False)
    yield connection
    connection.close()


class ProducerProcess:
    """A Python process that runs ``code`` (a producer script) with the test's environment."""

    def __init__(self, code: str, *args: str) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code), *args],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def wait(self, timeout: float = WAIT_S) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self.kill()

    def output(self) -> str:
        out, err = self.proc.communicate(timeout=WAIT_S)
        return out + err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=WAIT_S)


@pytest.fixture
def spawn():
    """Start producer processes; every one is killed at the end of the test."""
    started: list[ProducerProcess] = []

    def start(code: str, *args: str) -> ProducerProcess:
        process = ProducerProcess(code, *args)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()
        if process.proc.stdout:
            process.proc.stdout.close()
        if process.proc.stderr:
            process.proc.stderr.close()


def bounded(function: Callable[[], object], timeout: float = WAIT_S) -> object:
    """Run ``function`` in a thread; fail the test instead of hanging past ``timeout``."""
    outcome: dict[str, object] = {}

    def work() -> None:
        try:
            outcome["value"] = function()
        except BaseException as exc:  # re-raised in the test thread
            outcome["error"] = exc

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        pytest.fail(f"still running after {timeout} s")
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome.get("value")


def stream_word(name: str, word: int) -> int:
    """One header word of stream ``name`` of the in-memory namespace (see shm_ring.W_*)."""
    ring = Ring.attach(Catalog(None).require(name).segment)
    try:
        return ring.word(word)
    finally:
        ring.close()


def wait_reopened(name: str, written_before: int, timeout: float = WAIT_S) -> None:
    """Wait until a new producer has opened the ended stream ``name`` (or already wrote).

    An ended stream stays ended until a producer opens it, and a query that
    starts before that ends at once; a test that means the query to read a new
    producer's tuples waits for this first.
    """
    deadline = time.monotonic() + timeout
    while stream_word(name, W_EOS) and stream_word(name, W_HEAD_SEQ) == written_before:
        if time.monotonic() > deadline:
            pytest.fail(f"no producer opened stream {name!r} within {timeout} s")
        time.sleep(0.005)


class ScratchFs:
    """A small file system of the test's own: read-only or full on demand, for real.

    A tmpfs mount where this process may mount one (root); otherwise, a
    directory whose read-only mode is a chmod (which root would ignore, hence
    the mount) and no way to fill it (``fill`` skips the test).
    """

    def __init__(self, path: Path, mounted: bool) -> None:
        self.path = path
        self.mounted = mounted

    def readonly(self, on: bool = True) -> None:
        if self.mounted:
            _mount("-o", f"remount,{'ro' if on else 'rw'}", str(self.path))
        else:
            self.path.chmod(0o500 if on else 0o700)

    def fill(self) -> Path:
        """Take every free byte; delete the returned file to give them back."""
        if not self.mounted:
            pytest.skip("filling a disk needs a tmpfs mount")
        filler = self.path / "filler"
        with open(filler, "wb", buffering=0) as handle:
            with contextlib.suppress(OSError):
                while True:
                    handle.write(b"\0" * 4096)
        return filler


def _mount(*args: str) -> bool:
    done = subprocess.run(["mount", *args], capture_output=True, check=False)
    return done.returncode == 0


@pytest.fixture
def scratch_fs(tmp_path):
    """``make(path, size)``: a :class:`ScratchFs` at ``path`` (``size``, 2 MiB by default,
    when mounted); all unmounted after."""
    made: list[ScratchFs] = []

    def make(path: Path | None = None, size: str = "2m") -> ScratchFs:
        path = path or tmp_path / f"fs{len(made)}"
        path.mkdir(parents=True, exist_ok=True)
        mounted = os.geteuid() == 0
        if mounted and not _mount(
            "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)
        ):
            pytest.skip("cannot mount a tmpfs here (a read-only directory needs one as root)")
        made.append(ScratchFs(path, mounted))
        return made[-1]

    yield make
    for fs in reversed(made):
        if fs.mounted:
            subprocess.run(["umount", "-l", str(fs.path)], capture_output=True, check=False)
        else:
            fs.path.chmod(0o700)
