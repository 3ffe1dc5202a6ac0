"""The device kernel compiles to PTX for the argument types the launches give it.

numba's simulator runs the kernels as Python, so it accepts code the CUDA
target rejects (a type it cannot unify, a call it cannot lower). Here the
real target compiles :func:`matchsql.engine.gpu.kernels.walk` for every signature the
host code launches it with, in one pass over a partition and in a live stream's
batches over the device ring: the launches run against host arrays (the
``numba.cuda`` calls of the launch replaced by numpy, keeping their checks and
the arrays' layouts), the kernel launch only records its arguments (and writes
what a walk would, so the host code goes on), and each distinct signature is
compiled to PTX for ``sm_80`` and ``sm_90`` by NVVM. No GPU or driver is
needed, only numba-cuda and NVVM (``pip install numba-cuda
nvidia-cuda-nvcc-cu12``); elsewhere, and under the simulator, the test is
skipped.
"""

from __future__ import annotations

import importlib.util
import os
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pytest
from numba import cuda, typeof
from numba import types as nb_types

from matchsql.config import Config
from matchsql.engine.compiled.compiled_matcher import CompiledPlan
from matchsql.engine.gpu import gpu_matcher as M
from matchsql.engine.gpu import kernels as G
from matchsql.engine.gpu.gpu_live import LiveGpuMatcher
from matchsql.engine.gpu.gpu_plan import gpu_plan
from matchsql.engine.gpu.ring import DeviceRing
from matchsql.testing.dejavu_queries import Q1
from tests.property.strategies import SCHEMA, spec_of

#: The PTX targets: sm_80 (A100) and sm_90 (H100/H200).
TARGETS = {"sm_80": (8, 0), "sm_90": (9, 0)}
WALK = G.walk  # the kernel itself: the tests replace the module's attribute by a recorder

SIMULATED = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
TRADE = pa.schema(
    [("symbol", pa.string()), ("price", pa.float64()), ("volume", pa.int64()), ("ts", pa.int64())]
)
ROW_LOCAL = (
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS c ONE ROW PER MATCH "
    "PATTERN (A B+) WITHIN 3 DEFINE B AS x > PREV(x))"
)


class _Host(np.ndarray):
    """A host array standing in for a device array (``copy_to_host`` is a copy)."""

    def copy_to_host(self) -> np.ndarray:
        return np.asarray(self).copy()


@pytest.fixture(params=sorted(TARGETS))
def cc(request: pytest.FixtureRequest) -> tuple[int, int]:
    """The compute capability the kernel is compiled for."""
    return TARGETS[request.param]


@pytest.fixture
def launches(monkeypatch: pytest.MonkeyPatch, cc: tuple[int, int]) -> list[tuple]:
    """The argument lists of the kernel launches made while the test runs."""
    if SIMULATED or importlib.util.find_spec("numba_cuda") is None:
        pytest.skip("needs numba-cuda (not the simulator): pip install numba-cuda")
    try:
        cuda.compile_ptx(lambda a: None, (nb_types.int64[::1],), cc=cc)
    except Exception as exc:  # no NVVM: nvidia-cuda-nvcc-cu12 is not installed
        pytest.skip(f"NVVM is not available: {exc}")
    recorded: list[tuple] = []

    class Recorder:
        def __getitem__(self, grid: tuple) -> object:
            return lambda *args: recorded.append(_answer(args))

    sentry = importlib.import_module("numba.cuda.cudadrv.devicearray").sentry_contiguous

    def to_device(a: object) -> np.ndarray:
        """numba's check that a host array is one block, then a copy with its layout (a
        broadcast one keeps its strides: the device array is typed with layout 'A')."""
        host = np.asarray(a)
        sentry(host)
        whole = host.flags.c_contiguous or host.flags.f_contiguous
        return (np.array(host) if whole else host).view(_Host)

    monkeypatch.setattr(cuda, "to_device", to_device)
    monkeypatch.setattr(
        cuda, "device_array", lambda shape, dtype: np.zeros(shape, dtype).view(_Host)
    )
    monkeypatch.setattr(cuda, "synchronize", lambda: None)
    monkeypatch.setattr(G, "walk", Recorder())
    # A device function called by the kernel is compiled for the current device's
    # compute capability; without a driver there is none, so name the target's.
    dispatcher = importlib.import_module("numba.cuda.dispatcher")
    if hasattr(dispatcher, "get_current_device"):
        monkeypatch.setattr(
            dispatcher, "get_current_device", lambda: SimpleNamespace(compute_capability=cc)
        )
    return recorded


def _answer(args: tuple) -> tuple:
    """``args`` after writing what a walk of every start would: each start matches its
    own row alone (decided, one end), so the host code goes on as after a real launch:
    to the writing launch, and, live, to the next batch."""
    starts, out_end, out_first, out_last, out_status = args[3], *args[8:12]
    labels, label_off, write, each, out_count, out_total, out_hi, rec = (
        args[12:15] + args[31:32] + args[34:38]
    )
    out_end[:] = out_hi[:] = starts
    out_first[:] = out_last[:] = -1
    out_status[:] = G.S_OK
    out_count[:] = out_total[:] = 1
    if write:
        labels[label_off[:, 0]] = 0  # the first variable, not excluded
        if each:
            rec[label_off[:, 1]] = np.stack([starts, label_off[:, 0]], axis=1)
    return args


def _launch_all(plan: CompiledPlan, table: pa.Table, within: np.ndarray | None) -> None:
    """Every launch the host code makes for ``plan``: deciding and writing labels (and,
    under ALL MATCHES, counting and writing every end). The recorded launches write
    nothing: every start reads as decided, ending at row 0."""
    n = table.num_rows
    inp = M.device_input(plan, table, 0, n, n, True, within, span=1000)
    starts = np.arange(n, dtype=np.int64)
    got = M.decide(inp, starts, Config())
    if inp.each:
        one = np.ones(1, np.int64)  # start 0's one match, of one row
        M.every_match(inp, starts[:1], one, one, Config(), 0)
    else:
        M.matches_of(inp, starts, np.maximum(got[0], starts), Config(), 0)


def _compile(recorded: list[tuple], cc: tuple[int, int]) -> set[str]:
    """Each distinct signature of the ``recorded`` launches compiled to PTX."""
    signatures = {
        tuple(typeof(np.asarray(a)) if isinstance(a, np.ndarray) else typeof(a) for a in args)
        for args in recorded
    }
    assert signatures
    out = set()
    for sig in signatures:
        ptx, result = cuda.compile_ptx(WALK.py_func, sig, cc=cc)
        assert f".target sm_{cc[0]}{cc[1]}" in ptx
        assert ".entry" in ptx and str(result) == "none"
        out.add(str(sig))
    return out


def test_walk_compiles_for_all_matches_with_registers(
    launches: list[tuple], cc: tuple[int, int]
) -> None:
    plan = CompiledPlan.build(spec_of(Q1.rstrip().rstrip(";"), TRADE))
    prices = [10.0, 8.0, 7.0, 9.0, 12.0, 11.0, 13.0]
    table = pa.table(
        {"symbol": ["S"] * 7, "price": prices, "volume": [1] * 7, "ts": list(range(7))},
        schema=TRADE,
    )
    _launch_all(plan, table, None)
    assert len(launches) == 2  # the counting launch and the writing one
    assert _compile(launches, cc)


def test_walk_compiles_for_row_local_terms_and_within(
    launches: list[tuple], cc: tuple[int, int]
) -> None:
    plan = CompiledPlan.build(spec_of(ROW_LOCAL))
    table = pa.table({"id": [0, 1, 2, 3], "x": [1, 2, 3, 1], "y": [0, 0, 0, 0]})
    table = table.cast(pa.schema([("id", pa.int32()), ("x", pa.int32()), ("y", pa.int32())]))
    _launch_all(plan, table, np.array([3, 4, 4, 4], np.int64))
    assert len(launches) == 2  # deciding, writing the labels
    assert _compile(launches, cc)


LIVE = (
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS c, SUM(B.x) AS s "
    "ONE ROW PER MATCH {all} PATTERN (A B* C?) {within} "
    "DEFINE B AS x > PREV(x) AND x > A.x AND SUM(B.y) < 5, C AS y = 0)"
)


@pytest.mark.parametrize("every", [False, True], ids=["preferred", "all_matches"])
@pytest.mark.parametrize("within", [False, True], ids=["", "within"])
def test_walk_compiles_for_the_live_ring(
    launches: list[tuple], cc: tuple[int, int], every: bool, within: bool
) -> None:
    """A live partition launches ``walk`` over the device ring's columns (one launch a
    batch, and the writing ones): held rows cut at the front and wrapped around the
    ring's end (a small ring), so its views and joined pieces are what the kernel gets."""
    sql = LIVE.format(all="ALL MATCHES" if every else "", within="WITHIN 3" if within else "")
    plan = CompiledPlan.build(spec_of(sql))
    config = Config()
    matcher = LiveGpuMatcher(plan, (), config)
    matcher.ring = DeviceRing(gpu_plan(plan), capacity=4)
    rows = [{"id": i, "x": i % 4, "y": i % 3} for i in range(14)]
    got = []
    for a in range(0, len(rows), 3):
        got += matcher.feed(pa.RecordBatch.from_pylist(rows[a : a + 3], schema=SCHEMA))
    got += matcher.finish()
    assert sum(b.num_rows for b in got) == len(rows)  # each start matched its own row
    assert matcher.ring.wraps  # the held rows wrapped around the ring's end
    kinds = {(args[14], args[31]) for args in launches}  # (writing, each)
    assert kinds == {(False, every), (True, every)}
    assert _compile(launches, cc)
