"""The GPU path's settings and device handling, and its simulator suite in a child process.

numba reads ``NUMBA_ENABLE_CUDASIM`` at its first import, which in a test
session has long happened; ``tests/gpu/sim`` therefore runs in a child
interpreter started with the variable set (unless this process has it already,
in which case pytest collects and runs that folder directly).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import matchsql
from matchsql.config import Config
from matchsql.errors import Error

ROOT = Path(__file__).resolve().parents[2]
SIMULATED = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
QUERY = (
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES COUNT(*) AS c "
    "PATTERN (A B+) DEFINE B AS price > PREV(price))"
)


def _child(code: str, sim: bool) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env["NUMBA_ENABLE_CUDASIM"] = "1" if sim else "0"
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )


def test_settings_are_checked() -> None:
    config = Config()
    assert config.gpu == "auto"
    config.set("gpu", "ON")
    assert config.gpu == "on"
    with pytest.raises(Error, match="setting .gpu. must be one of auto, on, off"):
        config.set("gpu", "maybe")
    with pytest.raises(Error, match="gpu_min_work"):
        config.set("gpu_min_work", -1)


def test_import_does_not_load_cuda() -> None:
    done = _child("import sys, matchsql; print('numba.cuda' in sys.modules)", sim=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_off_and_auto_without_device_stay_on_cpu() -> None:
    con = matchsql.connect(demo=False, gpu="off")
    con.sql("CREATE TABLE t AS SELECT i AS ts, i % 5 AS price FROM range(20) r(i)")
    plan = "\n".join(r[0] for r in con.sql("EXPLAIN " + QUERY).fetchall())
    assert "path: gpu" not in plan
    # price = 0 1 2 3 4 0 1 ...: A at each 0, B+ over the rising 1..4: 5 rows a match.
    assert con.sql(QUERY).fetchall() == [(5,)] * 4


def test_on_without_device_says_how_to_get_one() -> None:
    code = (
        "import matchsql\n"
        "con = matchsql.connect(demo=False, gpu='on')\n"
        "con.sql('CREATE TABLE t AS SELECT i AS ts, i % 5 AS price FROM range(20) r(i)')\n"
        "from matchsql.engine.gpu.device import detect\n"
        "if detect().present: print('device present')\n"
        "else:\n"
        "    try: con.sql(" + repr(QUERY) + ").fetchall()\n"
        "    except matchsql.Error as e: print(type(e).__name__, e)\n"
    )
    done = _child(code, sim=False)
    assert done.returncode == 0, done.stderr
    if done.stdout.strip() == "device present":
        pytest.skip("this machine has a CUDA device")
    assert "no CUDA device: install the gpu extra" in done.stdout
    assert "NUMBA_ENABLE_CUDASIM=1" in done.stdout


def test_auto_without_driver_never_imports_numba_cuda() -> None:
    """Without a driver and without the simulator, ``gpu = 'auto'`` knows there is no
    device from the driver's library alone: numba.cuda costs every such query a third
    of a second at start-up otherwise."""
    code = (
        "import ctypes, sys\n"
        "try:\n"
        "    ctypes.CDLL('libcuda.so.1'); print('driver present')\n"
        "except OSError:\n"
        "    import matchsql\n"
        "    con = matchsql.connect(demo=False)\n"
        "    con.sql('CREATE TABLE t AS SELECT i AS ts, i % 5 AS price FROM range(20) r(i)')\n"
        "    print(con.sql(" + repr(QUERY) + ").fetchall(), 'numba.cuda' in sys.modules)\n"
    )
    done = _child(code, sim=False)
    assert done.returncode == 0, done.stderr
    if done.stdout.strip() == "driver present":
        pytest.skip("this machine has a CUDA driver")
    assert done.stdout.strip() == "[(5,), (5,), (5,), (5,)] False"


def test_explain_and_reasons_in_the_simulator() -> None:
    code = (
        "import matchsql\n"
        "con = matchsql.connect(demo=False, gpu='on')\n"
        "con.sql(\"CREATE TABLE t AS SELECT i AS ts, i % 5 AS price, 'x' AS s "
        'FROM range(20) r(i)")\n'
        "print('\\n'.join(r[0] for r in con.sql('EXPLAIN ' + " + repr(QUERY) + ").fetchall()))\n"
        "print(con.sql(" + repr(QUERY) + ").fetchall())\n"
        "try: con.sql(" + repr(QUERY.replace("price > PREV(price)", "s > 'x'")) + ").fetchall()\n"
        "except matchsql.Error as e: print(type(e).__name__, e)\n"
    )
    done = _child(code, sim=True)
    assert done.returncode == 0, done.stderr
    assert "path: gpu" in done.stdout
    assert "work estimate: rows x window" in done.stdout
    # price = 0 1 2 3 4 0 1 ...: A at each 0, B+ over the rising 1..4: 5 rows a match.
    assert "[(5,), (5,), (5,), (5,)]" in done.stdout
    assert (
        "gpu = 'on' does not apply to this query: DEFINE B: GT over strings is not "
        "evaluated by the GPU column path (only =, <> and IN)" in done.stdout
    )


@pytest.mark.skipif(SIMULATED, reason="this process runs tests/gpu/sim itself")
def test_simulator_suite() -> None:
    """Conformance cases and random queries on the GPU path, in numba's simulator."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NUMBA_ENABLE_CUDASIM": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-x",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "tests/gpu/sim",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
