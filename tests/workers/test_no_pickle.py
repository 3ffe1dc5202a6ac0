"""Nothing read from shared memory is unpickled (issue 34: nothing runs that the user
did not ask for).

The worker processes exchange their messages through shared-memory segments: a
pickle there would run whatever its writer chose when its reader loads it. The
package imports no pickle at all, and every decoder of a message refuses a pickle
(one whose loading would create a file) with a matchsql error, creating nothing,
in this process and in a worker process.
"""

from __future__ import annotations

import ast
import dataclasses
import pickle
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import matchsql.execution.workers
from matchsql.config import Config
from matchsql.engine.states import StateKind, StateSpec
from matchsql.errors import Error, ExecutionError, LimitExceededError, SemanticError
from matchsql.execution.router.partitions import NAN
from matchsql.execution.workers import frames, process, wire
from matchsql.execution.workers.pool import WorkerPool
from matchsql.execution.workers.shared_rows import SharedLayout
from matchsql.execution.workers.stream_runs import Streamed
from matchsql.execution.workers.worker_matching import Query
from matchsql.execution.workers.worker_router import query_payload
from matchsql.plan.spec import MatchSpec
from matchsql.saved_state.state_format import SnapshotError
from tests.fsm.specs import make_spec

PACKAGE = Path(matchsql.execution.workers.__file__).parent
#: Modules whose loading of bytes can run code.
UNSAFE = {"pickle", "_pickle", "cPickle", "cloudpickle", "dill", "marshal", "shelve"}


class _Payload:
    """Unpickled, it creates the file at ``path`` (builtins.open: no import needed)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return open, (self.path, "w")


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "__import__"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            found.add(str(node.args[0].value).split(".")[0])
    return found


def test_no_worker_module_imports_pickle() -> None:
    modules = sorted(PACKAGE.glob("*.py"))
    assert len(modules) > 10 and any(p.name == "wire.py" for p in modules)
    unsafe = {p.name: sorted(_imports(p) & UNSAFE) for p in modules}
    assert {name: found for name, found in unsafe.items() if found} == {}


def test_the_import_check_sees_an_import(tmp_path) -> None:
    """The check above can fail: it sees every way of writing the import."""
    module = tmp_path / "m.py"
    for text in (
        "import pickle",
        "import os, pickle as p",
        "from pickle import loads",
        "def f():\n    import cloudpickle",
        "x = __import__('pickle')",
    ):
        module.write_text(f"# pickle in a comment is no import\n{text}\n")
        assert _imports(module) & UNSAFE, text
    module.write_text("# import pickle\ns = 'import pickle'\n")
    assert not _imports(module) & UNSAFE


@pytest.fixture
def marker(tmp_path) -> Path:
    return tmp_path / "made"


@pytest.fixture
def evil(marker) -> bytes:
    blob = pickle.dumps(_Payload(str(marker)), protocol=pickle.HIGHEST_PROTOCOL)
    pickle.loads(blob).close()  # the payload does create the file when unpickled ...
    assert marker.exists()
    marker.unlink()  # ... and the tests below check that nothing does
    return blob


def _spec() -> MatchSpec:
    rows = [{"p": 1, "id": i, "v": v} for i, v in enumerate([5, 6, 7, 3, 4])]
    return make_spec(rows, "A B+", define={"B": "v > PREV(v)"}, partition_by=["p"])


def _framed(meta: bytes) -> bytes:
    return struct.pack("<Q", len(meta)) + meta


class _Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple] = []

    def send(self, kind, payload=None, extra=None, idle=None) -> None:
        self.sent.append((kind, extra))


@pytest.mark.parametrize("old", [False, True])
def test_every_decoder_refuses_a_pickle(evil: bytes, marker: Path, old: bool) -> None:
    blob = pickle.dumps(_Payload(str(marker)), protocol=0) if old else evil
    query = Query(0, _spec(), Config())
    streamed = Streamed(0, _spec(), Config(), False)
    decoders = {
        "wire.loads": lambda: wire.loads(blob),
        "wire.query_of": lambda: wire.query_of(blob),
        "wire.error_of": lambda: wire.error_of(blob),
        "frames.unpack": lambda: frames.unpack(_framed(blob)),
        "SharedLayout.of": lambda: SharedLayout.of(blob),
        "process query": lambda: process._query(process.OrderedDict(), blob),
        "take": lambda: query.serve(_Recorder(), "take", _framed(blob), None),
        "data": lambda: query.serve(_Recorder(), "data", _framed(blob), None),
        "restore": lambda: query.serve(_Recorder(), "restore", blob, 0),
        "stream feed": lambda: streamed.serve(_Recorder(), "feed", _framed(blob), 0),
        "stream restore": lambda: streamed.serve(_Recorder(), "restore", blob, 0),
        "stream load": lambda: streamed.serve(_Recorder(), "load", blob, None),
        "stream observe": lambda: streamed.serve(_Recorder(), "observe", blob, None),
    }
    for name, decode in decoders.items():
        with pytest.raises(Error) as raised:
            decode()
        assert isinstance(raised.value, wire.MessageError), name
        assert "worker process message is unreadable" in str(raised.value), name
        if not old:
            assert "is a Python pickle, which matchsql never loads" in str(raised.value), name
        assert not marker.exists(), name


def test_a_worker_process_refuses_a_pickle(evil: bytes, marker: Path) -> None:
    """Each message kind a worker reads, with a pickle for payload: the worker answers
    with a matchsql error, creates nothing, and serves the next query."""
    spec, config = _spec(), Config()
    good = wire.query_bytes(spec, config)
    cases = [
        ("query", evil),
        ("gather", evil),
        ("stream", evil),
        ("data", _framed(evil)),
        ("take", _framed(evil)),
        ("share", evil),
        ("restore", evil),
    ]
    pool = WorkerPool(1)
    try:
        worker = pool.workers[0]
        assert worker.outbox is not None
        for kind, payload in cases:
            if kind not in process.KINDS:
                worker.inbox.send("query", good)
            worker.inbox.send(kind, payload, 0)
            worker.inbox.send("end")
            answers = []
            while True:
                got = worker.outbox.receive()
                answers.append(got)
                if got[0] == "ended":
                    break
            errors = [wire.error_of(payload) for name, payload, _ in answers if name == "error"]
            assert len(errors) == 1, (kind, answers)
            assert isinstance(errors[0], ExecutionError), kind
            assert "is a Python pickle, which matchsql never loads" in errors[0].message, kind
            assert not marker.exists(), kind
    finally:
        pool.kill()
    assert not marker.exists()


def test_a_query_message_builds_the_same_query() -> None:
    spec = _spec()
    config = dataclasses.replace(Config(), workers=2, adaptive_u="auto")
    payload = wire.query_bytes(spec, config, True)
    assert payload == wire.query_bytes(spec, config, True)  # a worker keeps it by its bytes
    assert query_payload(spec, config) is query_payload(spec, config)  # the router keeps it
    back, settings, live = wire.query_of(payload)
    assert back == spec and back is not spec and settings == config and live is True
    assert back.columns.equals(spec.columns)
    assert [repr(d) for d in back.defines.values()] == [repr(d) for d in spec.defines.values()]
    states = (StateSpec("A", StateKind.SINGLETON), StateSpec("B", StateKind.STAR))
    assert wire.query_of(wire.query_bytes(states, (0, 1))) == (states, (0, 1))


def test_a_query_message_names_only_known_classes() -> None:
    """A class name is looked up in fixed tables, never imported or called by name."""
    for part in (
        wire._Part("data", "os.system", {}),
        wire._Part("enum", "os.environ", "x"),
        wire._Part("expr", "", [{"c": "os.system"}]),
        wire._Part("expr", "", [{"c": "subprocess.Popen"}]),
        wire._Part("what", "", None),
    ):
        payload = wire.dumps((part,))
        with pytest.raises(wire.MessageError):
            wire.query_of(payload)


def test_an_error_travels_as_its_class_name_and_text() -> None:
    for err in (
        SemanticError("no such variable", sql="SELECT 1", line=1, column=8),
        LimitExceededError("too many rows"),
        SnapshotError("bad state"),
    ):
        back = wire.error_of(wire.error_bytes(err))
        assert str(back) == str(err)
        # a class off the list (SnapshotError) travels as its nearest class on it
        assert type(back) is (ExecutionError if isinstance(err, SnapshotError) else type(err))
    forged = wire.dumps(("SystemExit", "boom", None, None, None))
    back = wire.error_of(forged)
    assert type(back) is ExecutionError and back.message == "boom"


def test_plain_messages_keep_their_arrays_and_keys() -> None:
    entries = [(0, 3, ("a", 1), 10, True), (1, 3, (None, 2.5), 0, False)]
    starts, stops = np.array([0, 10], np.int64), np.array([10, 12], np.int64)
    back = wire.loads(wire.dumps((entries, starts, stops, None)))
    assert back[0] == entries and back[3] is None
    assert back[1].tolist() == [0, 10] and back[2].tolist() == [10, 12]
    # a NaN key is the one NaN of partition keys, which dicts of keys match by identity
    (key,) = wire.loads(wire.dumps([(NAN, "a")]))
    assert key[0] is NAN and key == (NAN, "a")
    batch = pa.record_batch({"x": [1, 2, 3]})
    assert frames.unpack(frames.pack(entries, [batch])) == (entries, [batch])


ROUND_TRIP = [
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES "
    "MATCH_NUMBER() AS mn, CLASSIFIER() AS c, SUM(B.v) AS s, AVG(v) * 2 AS a "
    "ALL ROWS PER MATCH SHOW EMPTY MATCHES AFTER MATCH SKIP TO NEXT ROW "
    "PATTERN (^ A B+ C? | {- X -} Y) SUBSET U = (A, C) "
    "DEFINE B AS v > PREV(v) AND upper(name) <> 'Q', C AS v < FIRST(U.v) + 1.5, "
    "Y AS abs(v - 2) < 1)",
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(ts) AS f, "
    "LAST(name) AS l ONE ROW PER MATCH PATTERN (A{2,} PERMUTE(B, C)) "
    "WITHIN INTERVAL '3' SECOND DEFINE A AS v % 2 = 0, B AS NEXT(v) > v)",
]


def test_compiled_queries_travel_whole(monkeypatch) -> None:
    """Specs the compiler made (measures, subsets, WITHIN, derived columns) come back
    equal, with the same plan."""
    import matchsql
    from matchsql.engine import compiled_query, planner

    specs: list[MatchSpec] = []
    made = compiled_query.CompiledMatch.__init__

    def record(self, spec):
        specs.append(spec)
        made(self, spec)

    monkeypatch.setattr(compiled_query.CompiledMatch, "__init__", record)
    con = matchsql.connect(demo=False)
    try:
        con.sql(
            "CREATE TABLE t AS SELECT i % 3 AS p, TIMESTAMP '2024-01-01' + "
            "INTERVAL (i) SECOND AS ts, (i * 7) % 5 AS v, chr((65 + i % 4)::INTEGER) AS name "
            "FROM range(40) r(i)"
        )
        for query in ROUND_TRIP:
            con.sql(query).fetchall()
    finally:
        con.close()
    assert len(specs) >= len(ROUND_TRIP)
    config = Config()
    for spec in specs:
        back, settings = wire.query_of(wire.query_bytes(spec, config))
        assert back == spec and settings == config
        assert back.output_schema().equals(spec.output_schema())
        assert [repr(m.expr) for m in back.measures] == [repr(m.expr) for m in spec.measures]
        assert planner.explain(back, config) == planner.explain(spec, config)
