"""matchsql on real Spark clusters: a standalone master with two workers, and Spark Connect.

The local tests run everything in one JVM (``local[2]``), where the executors' Python is
the test's own. Here the executors are separate JVMs started by standalone workers,
whose Python workers find matchsql only because the application ships it
(``spark.executorEnv.PYTHONPATH``), and a Spark Connect client talks over gRPC, with
DataFrame APIs only, to the Connect service of the same driver (SparkConnectPlugin: a
server of its own would start a driver and two executors more, ~30 s on 2 cores). A
driver program in its own process (:mod:`tests.spark.cluster_client`) runs the queries;
the rows must be the embedded engine's. One cluster for the test session, started in
~10 s and stopped once the driver program has run; the module takes ~55 s on 2 busy
cores. Every process it started is killed at the end, also when a test fails.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from . import cluster_client as client
from .cluster import SOURCE_ROOT, base_env, standalone_cluster
from .conftest import _spark_available
from .helpers import canonical, embedded, table_rows, with_order

pytestmark = [pytest.mark.xdist_group("spark")]


@pytest.fixture(scope="session")
def results(tmp_path_factory, worker_id: str) -> Path:
    """Start the cluster, run the driver program against it, stop the cluster; the results
    land in the returned directory (``classic/``: classic pyspark, ``connect/``: through
    Spark Connect). Once per test run, whichever worker asks first: pytest-xdist ran this
    module's tests on both workers (the group mark notwithstanding), each starting a
    cluster of its own (75 s each, side by side). The others wait on a lock in the
    workers' shared temporary directory and read the same results."""
    reason = _spark_available()
    if reason:
        pytest.skip(f"Spark tests need Java and pyspark >= 4: {reason}")
    shared = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        shared = shared.parent
    out = shared / "cluster-results"
    with open(shared / "cluster.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "done").exists():
            shutil.rmtree(out, ignore_errors=True)
            _run_cluster(out)
            (out / "done").touch()
    return out


def _run_cluster(out: Path) -> None:
    for sub in ("classic", "connect"):
        (out / sub).mkdir(parents=True)
    env = base_env(out)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(SOURCE_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    env["PYSPARK_PYTHON"] = sys.executable
    with standalone_cluster(workers=2) as cluster:
        driver = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.spark.cluster_client",
                "classic",
                cluster.master,
                str(out),
            ],
            cwd=SOURCE_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its group holds its JVM and its Connect client too
        )
        try:
            stdout, stderr = driver.communicate(timeout=400)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(driver.pid, signal.SIGKILL)  # whatever is left of it, also on a timeout
    timings = out / "timings.txt"
    print(timings.read_text() if timings.exists() else "")  # shown with pytest -s
    assert driver.returncode == 0, f"driver failed:\n{stdout[-3000:]}\n{stderr[-6000:]}"


def check_batch(out: Path) -> None:
    data = client.batch_data()
    for name, query in client.BATCH.items():
        got = table_rows(client.read(out / f"batch-{name}.arrow"))
        expected = embedded("trade", data, query if "ORDER BY" in query else with_order(query))
        assert len(expected) > 20, name
        assert canonical(got) == canonical(expected), name


def test_batch_on_standalone_cluster(results: Path) -> None:
    check_batch(results / "classic")


def check_stream(out: Path) -> None:
    got = table_rows(client.read(out / "stream.arrow"))
    expected = embedded("trade", client.stream_data(), with_order(client.STREAM))
    assert len(expected) > 20
    assert len(got) == len(expected)
    assert canonical(got) == canonical(expected)


def test_stream_on_standalone_cluster(results: Path) -> None:
    """Key state in the state store of executors in other JVMs: the rows are the
    embedded engine's once every key's end marker has arrived."""
    check_stream(results / "classic")


def test_executors_without_matchsql_get_a_clear_error(results: Path) -> None:
    """Executors whose Python lacks matchsql: matchsql's error at the call, naming the
    interpreter and what it lacks, and how to ship matchsql; no Java stack trace."""
    kind, message = (results / "classic" / "missing.txt").read_text().split("\n", 1)
    assert kind == "ExecutorSetupError", message[-3000:]
    assert "bare-venv/bin/python (Python " in message  # the executors' interpreter
    assert (
        "lacks matchsql.integrations.spark.worker (ModuleNotFoundError: No module named 'matchsql')"
        in message
    )
    assert "--py-files" in message and "--archives" in message
    assert "at org.apache" not in message and "Traceback" not in message


def test_matchsql_shipped_as_a_zip_runs_there(results: Path) -> None:
    """The same executors' Python, with matchsql's package added as a zip (addPyFile,
    what spark-submit --py-files does): the query runs, with the embedded engine's rows."""
    got = table_rows(client.read(results / "classic" / "shipped.arrow"))
    expected = embedded("trade", client.batch_data(), with_order(client.BATCH["Q4"]))
    assert canonical(got) == canonical(expected)


def test_batch_over_spark_connect(results: Path) -> None:
    """A Connect client (DataFrame APIs over gRPC, no SparkContext) gets the same rows."""
    check_batch(results / "connect")


def test_stream_over_spark_connect(results: Path) -> None:
    """The streaming path (applyInPandasWithState, a file source and sink) over Connect."""
    check_stream(results / "connect")
