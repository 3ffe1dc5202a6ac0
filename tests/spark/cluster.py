"""Real Spark processes for the cluster tests: a standalone master with two workers, each
started in the foreground by ``spark-class`` so that the test owns its process and kills
it at the end (``start-master.sh`` and friends daemonize, and a failed test would leave
them running).

Everything listens on 127.0.0.1 at ports chosen free; logs, work and event directories
are under one temporary directory that goes at the end. The JVMs are small (256 MB for
the daemons, 512 MB executors), because the machine is shared.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

import matchsql

SPARK_HOME = Path(pyspark.__file__).parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
# The directory that holds the matchsql package being tested (a worktree, or a checkout).
SOURCE_ROOT = Path(matchsql.__file__).resolve().parent.parent


# Short-lived JVMs on a small shared machine: the quick compiler only, one GC thread.
JAVA_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def free_port() -> int:
    """A TCP port nothing listens on now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_env(root: Path) -> dict[str, str]:
    """The environment of the Spark daemons: this pyspark's Spark, loopback only, small
    daemon heaps, an empty configuration directory (no stray spark-defaults.conf), and
    no PYTHONPATH: executors see matchsql only where the application ships it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
    env.pop("PYTHONPATH", None)
    conf = root / "conf"
    conf.mkdir(exist_ok=True)
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_CONF_DIR=str(conf),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOG_DIR=str(root / "logs"),
        SPARK_DAEMON_MEMORY="256m",
        SPARK_DAEMON_JAVA_OPTS=JAVA_OPTS,
    )
    return env


@dataclass
class Processes:
    """The processes a fixture started, each in its own process group, with its log file."""

    root: Path
    started: list[tuple[subprocess.Popen, Path]] = field(default_factory=list)

    def start(self, name: str, args: list[str], env: dict[str, str]) -> subprocess.Popen:
        log = self.root / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [str(SPARK_CLASS), *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=self.root,
                start_new_session=True,  # its own group: killed with its children
            )
        self.started.append((proc, log))
        return proc

    def check_alive(self) -> None:
        for proc, log in self.started:
            if proc.poll() is not None:
                raise RuntimeError(f"{log.stem} exited with {proc.returncode}:\n{tail(log)}")

    def stop(self) -> None:
        """TERM every group this fixture started, then KILL what is left after a few seconds."""
        for proc, _ in reversed(self.started):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for proc, _ in reversed(self.started):
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)

    def logs(self) -> str:
        return "\n".join(f"--- {log.stem}\n{tail(log)}" for _, log in self.started)


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class Standalone:
    """A running standalone cluster: its master URL and its root directory."""

    master: str
    ui: str
    root: Path


def wait_until(what: str, ready, processes: Processes, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while True:
        processes.check_alive()
        if ready():
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not ready after {timeout:.0f} s:\n{processes.logs()}")
        time.sleep(0.3)


def alive_workers(ui: str) -> int:
    try:
        with urllib.request.urlopen(f"{ui}/json/", timeout=2) as response:
            return int(json.load(response).get("aliveworkers", 0))
    except (OSError, ValueError):
        return 0


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def standalone_cluster(workers: int = 2) -> Iterator[Standalone]:
    """A master and ``workers`` workers (2 cores, 1 GB each) on 127.0.0.1, until the
    block ends: every process is killed and the directory removed, even on failure."""
    root = Path(tempfile.mkdtemp(prefix="matchsql-spark-cluster-"))
    processes = Processes(root)
    env = base_env(root)
    try:
        port, ui_port = free_port(), free_port()
        master = f"spark://127.0.0.1:{port}"
        ui = f"http://127.0.0.1:{ui_port}"
        processes.start(
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                *("--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui_port)),
            ],
            env,
        )
        wait_until("the master", lambda: listening(port), processes)
        for i in range(workers):
            work = root / f"work{i}"
            work.mkdir()
            processes.start(
                f"worker{i}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    *("--host", "127.0.0.1", "--port", str(free_port())),
                    *("--webui-port", str(free_port())),
                    *("--cores", "2", "--memory", "1g", "--work-dir", str(work)),
                    master,
                ],
                env,
            )
        wait_until(f"{workers} workers", lambda: alive_workers(ui) >= workers, processes)
        yield Standalone(master, ui, root)
    finally:
        processes.stop()
        shutil.rmtree(root, ignore_errors=True)


def executor_conf(source_root: Path = SOURCE_ROOT) -> dict[str, str]:
    """Spark settings that ship this checkout's matchsql to the executors (PYTHONPATH) and
    keep each application small: two 1-core executors of 512 MB."""
    conf = {
        "spark.executorEnv.PYTHONPATH": str(source_root),
        "spark.cores.max": "2",
        "spark.executor.cores": "1",
        "spark.executor.memory": "512m",
        "spark.executor.extraJavaOptions": JAVA_OPTS,
        "spark.driver.extraJavaOptions": JAVA_OPTS,
        "spark.driver.memory": "768m",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.session.timeZone": "UTC",
    }
    if os.environ.get("NUMBA_CACHE_DIR"):  # the compiled kernels, where the tests keep them
        conf["spark.executorEnv.NUMBA_CACHE_DIR"] = os.environ["NUMBA_CACHE_DIR"]
    return conf
