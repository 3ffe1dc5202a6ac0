"""Strings, dates, timestamps, decimals and booleans in conditions that read other rows.

The registers path reads such columns through per-call codes
(:mod:`matchsql.engine.compiled.ordinals`): random queries over them must give the
reference's rows, fed in one batch or several, in chunks on threads, and through
SQL over many partitions (batched); the codes themselves must keep the values'
order and equality, literals included.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import matchsql
from matchsql.config import Config
from matchsql.engine.compiled import ordinals as O
from matchsql.engine.planner import choose_path, new_partition_matcher
from matchsql.errors import ExecutionError
from tests.property.strategies import queries, spec_of

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

SCHEMA = pa.schema(
    [
        ("id", pa.int32()),
        ("x", pa.int32()),
        ("y", pa.int32()),
        ("s", pa.string()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("ns")),
        ("dec", pa.decimal128(38, 2)),
        ("f", pa.bool_()),
    ]
)
TEXTS = [None, "", "a", "b", "é", "Ärger", "zz", "日本", "a\x00", "JFK"]
DATES = [None, dt.date(2024, 1, 1), dt.date(2024, 1, 2), dt.date(1969, 12, 31)]
STAMPS = [
    None,
    dt.datetime(2024, 1, 1),
    dt.datetime(2024, 1, 1, 0, 0, 0, 1),
    dt.datetime(2262, 4, 1),
]
DECIMALS = [
    None,
    Decimal("0.00"),
    Decimal("1.50"),
    Decimal("-1.50"),
    Decimal("123456789012345678901234567890.01"),
    Decimal("123456789012345678901234567890.02"),
]

# Conditions that read other rows over the coded columns: all run on the registers path.
CONDITIONS = [
    "B.s = A.s",
    "s <> FIRST(s)",
    "s > A.s",
    "LAST(U.s) <= s",
    "s < 'é' OR A.s = ''",
    "A.s >= 'b' AND s <> A.s",
    "s BETWEEN A.s AND 'zz'",
    "A.s IS NULL OR s = A.s",
    "FIRST(B.s) = 'JFK' OR LAST(s, 1) > s",
    "d > FIRST(d)",
    "ts = A.ts",
    "ts < LAST(B.ts)",
    "dec < A.dec",
    "dec >= FIRST(dec) AND s <> ''",
    "f = A.f",
    "A.f OR f IS NULL",
    "NOT (s = A.s) AND x >= A.x",
    "d = A.d OR d < LAST(U.d)",
]


def _rows(draw: st.DrawFn) -> list[dict]:
    n = draw(st.integers(0, 9))
    pick = st.sampled_from
    small = st.one_of(st.none(), st.integers(0, 3))
    return [
        {
            "id": i,
            "x": draw(small),
            "y": draw(small),
            "s": draw(pick(TEXTS)),
            "d": draw(pick(DATES)),
            "ts": draw(pick(STAMPS)),
            "dec": draw(pick(DECIMALS)),
            "f": draw(pick([None, True, False])),
        }
        for i in range(n)
    ]


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, list[dict], list[int]]:
    sql = draw(queries())
    a, b = draw(st.sampled_from(CONDITIONS)), draw(st.sampled_from(CONDITIONS))
    head, _, _ = sql.rpartition("DEFINE")
    rows = _rows(draw)
    splits = draw(st.lists(st.integers(0, len(rows)), max_size=3))
    return f"{head}DEFINE A AS {a}, B AS {b}\n)", rows, splits


def _run(spec, rows: list[dict], splits: list[int], path: str, split_rows: int = 0):
    config = Config()
    config.execution_path = path
    config.threads = 2 if split_rows else 1
    config.split_rows = split_rows
    try:
        matcher = new_partition_matcher(spec, (), config)
        out, begin = [], 0
        for end in [*sorted(splits), len(rows)]:
            out += matcher.feed(pa.RecordBatch.from_pylist(rows[begin:end], schema=SCHEMA))
            begin = end
        out += matcher.finish()
    except ExecutionError as exc:
        if "does not apply to this query" in exc.message:
            return "n/a", exc.message
        return "error", type(exc).__name__
    except matchsql.Error as exc:
        return "error", type(exc).__name__
    return "rows", [tuple(r.values()) for b in out for r in b.to_pylist()]


@SETTINGS
@given(cases())
def test_coded_columns_match_the_reference(case: tuple[str, list[dict], list[int]]) -> None:
    sql, rows, splits = case
    try:
        spec = spec_of(sql, SCHEMA)
    except matchsql.Error:
        assume(False)
        return
    reference = _run(spec, rows, [], "reference")
    got = _run(spec, rows, splits, "registers")
    assert got[0] != "n/a", (sql, got)
    assert got == reference, (sql, rows, splits)
    chunked = _run(spec, rows, [], "registers", split_rows=2)
    assert chunked == reference, (sql, rows, "chunks")


def test_explain_says_registers_for_cross_row_string_equality() -> None:
    con = matchsql.connect(demo=False)
    con.sql("CREATE TABLE flights (carrier VARCHAR, ts TIMESTAMP, origin VARCHAR, delay DOUBLE)")
    sql = """SELECT * FROM flights MATCH_RECOGNIZE (PARTITION BY carrier ORDER BY ts
      MEASURES FIRST(A.ts) AS t0, COUNT(*) AS n ONE ROW PER MATCH
      PATTERN (A B+) DEFINE B AS B.origin = A.origin AND B.delay > PREV(B.delay))"""
    lines = [r[0] for r in con.sql("EXPLAIN " + sql).fetchall()]
    assert "path: registers" in lines


def test_comparisons_the_codes_cannot_make_stay_on_the_reference() -> None:
    base = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n
      ONE ROW PER MATCH PATTERN (A B+) DEFINE B AS {})"""
    for cond, why in [
        ("s = A.d", "another type"),
        ("dec > A.dec + 1", "non-numeric"),
        ("d > '2024-01-01' AND d > A.d", "date32"),
        ("MIN(B.s) < s", "non-numeric"),
    ]:
        choice = choose_path(spec_of(base.format(cond), SCHEMA))
        assert choice.name == "reference" and why in choice.reason, (cond, choice.reason)


def test_null_strings_compare_unknown_across_rows() -> None:
    con = matchsql.connect(demo=False)
    con.duckdb.register(
        "src", pa.table({"id": list(range(6)), "s": [None, None, "a", "a", "", ""]})
    )
    sql = """SELECT * FROM src MATCH_RECOGNIZE (ORDER BY id MEASURES FIRST(A.id) AS a,
      COUNT(*) AS n ONE ROW PER MATCH PATTERN (A B+) DEFINE B AS B.s = A.s)"""
    got = {}
    for path in ("registers", "reference"):
        con.sql(f"SET execution_path = '{path}'")
        got[path] = con.sql(sql).fetchall()
    assert got["registers"] == got["reference"] == [(2, 2), (4, 2)]


@pytest.mark.parametrize("threads", [1, 2])
def test_many_partitions_through_sql_match_the_reference(threads: int) -> None:
    """Whole partitions of a batch matched together (one dictionary for all of them)
    and partitions on threads."""
    rng = np.random.default_rng(7)
    n = 4000
    words = np.array(["JFK", "LAX", "ORD", "ÅRE", "", "日本", "a"], dtype=object)
    s = words[rng.integers(0, len(words), n)]
    s[rng.random(n) < 0.1] = None
    table = pa.table(
        {
            "g": rng.integers(0, 60, n),
            "id": np.arange(n),
            "s": pa.array(s.tolist(), pa.string()),
            "v": rng.integers(0, 5, n),
        }
    )
    con = matchsql.connect(demo=False, threads=threads)
    con.duckdb.register("src", table)
    for define in [
        "B.s = A.s AND B.v >= PREV(B.v)",
        "B.s > A.s OR B.s = 'ORD'",
        "B.s <= FIRST(B.s) AND B.s <> ''",
    ]:
        sql = f"""SELECT * FROM src MATCH_RECOGNIZE (PARTITION BY g ORDER BY id
          MEASURES FIRST(A.id) AS a, COUNT(*) AS n, LAST(B.s) AS ls ONE ROW PER MATCH
          PATTERN (A B+) DEFINE B AS {define}) ORDER BY g, a"""
        assert_registers_equal_reference(con, sql, define)


def _sign(a: object, b: object) -> int:
    return (a > b) - (a < b)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    values=st.lists(st.one_of(st.none(), st.text(max_size=3)), min_size=1, max_size=30),
    literals=st.lists(st.text(max_size=3), max_size=4, unique=True),
    ordered=st.booleans(),
    cut=st.integers(0, 30),
)
def test_codes_keep_order_and_equality(
    values: list, literals: list, ordered: bool, cut: int
) -> None:
    group = O.group_of(pa.string())
    arrays = [pa.array(values[:cut], pa.string()), pa.array(values[cut:], pa.large_string())]
    codes = np.concatenate(O.encode(arrays, group, literals, ordered))
    fixed = O.literal_codes(literals, group)
    pairs = [(v, float(c)) for v, c in zip(values, codes) if v is not None]
    pairs += list(fixed.items())
    for a, ca in pairs:
        for b, cb in pairs:
            if ordered:
                assert _sign(a, b) == _sign(ca, cb), (a, b, ca, cb)
            else:
                assert (a == b) == (ca == cb), (a, b, ca, cb)


# Strings around the short codes' limit (6 UTF-8 bytes): empty, NUL bytes (a shorter
# string padded with zeros must not equal it), multi-byte characters, 6, 7 and 8 bytes.
EDGE_TEXTS = [
    None,
    "",
    "\x00",
    "a",
    "a\x00",
    "a\x00\x00",
    "ab",
    "abcdef",
    "abcdeg",
    "abcdefg",
    "abcdefgh",
    "abcde\x00",
    "é",
    "éé",
    "ééé",
    "éééé",
    "日本",
    "日本a",
    "日本ab",
    "\U0001f600",
    "\U0001f600ab",
    "\U0001f600abc",
    "\x7f",
    "\x80",
    "ÿ",
]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    values=st.lists(
        st.one_of(st.none(), st.sampled_from(EDGE_TEXTS), st.text(max_size=4)),
        min_size=1,
        max_size=40,
    ),
    lead=st.integers(0, 11),
    large=st.booleans(),
    ordered=st.booleans(),
)
def test_short_codes_keep_byte_order_and_equality(
    values: list, lead: int, large: bool, ordered: bool
) -> None:
    """Codes of a sliced array (offsets and validity bits not starting at 0) keep the
    strings' UTF-8 byte order, with and without the dictionary (a longer string)."""
    kind = pa.large_string() if large else pa.string()
    array = pa.array(["zzzzzzzz", None] * lead + values, kind).slice(2 * lead)
    codes = O.encode([array], O.group_of(kind), (), ordered)[0]
    short = all(v is None or len(v.encode()) <= O.SHORT for v in values)
    assert (O._short_codes([array]) is not None) == short
    pairs = [(v.encode(), float(c)) for v, c in zip(values, codes) if v is not None]
    assert not short or all(c == 0 for v, c in zip(values, codes) if v is None)
    for a, ca in pairs:
        for b, cb in pairs:
            if ordered or short:
                assert _sign(a, b) == _sign(ca, cb), (a, b, ca, cb)
            else:
                assert (a == b) == (ca == cb), (a, b, ca, cb)


def test_short_codes_order_strings_as_duckdb_does() -> None:
    """The codes' order is DuckDB's (binary collation: the UTF-8 bytes), which is the
    order of the strings' code points the reference compares."""
    con = matchsql.connect(demo=False)
    texts = [t for t in EDGE_TEXTS if t is not None and len(t.encode()) <= O.SHORT]
    con.duckdb.register("texts", pa.table({"s": pa.array(texts, pa.string())}))
    by_duckdb = [r[0] for r in con.duckdb.sql("SELECT s FROM texts ORDER BY s").fetchall()]
    codes = O.encode([pa.array(texts, pa.string())], O.group_of(pa.string()), (), True)[0]
    by_codes = [texts[i] for i in np.argsort(codes, kind="stable")]
    assert by_codes == by_duckdb == sorted(texts)
    assert len(set(codes.tolist())) == len(texts)


@pytest.mark.parametrize("mix", ["short", "long", "mixed"])
def test_edge_strings_through_sql_match_the_reference(mix: str) -> None:
    """Partitions of strings of 0-8 bytes (NULLs, NUL bytes, multi-byte characters), some
    batches all short and some not: the registers path gives the reference's rows."""
    rng = np.random.default_rng(11)
    pool = [t for t in EDGE_TEXTS if t is None or mix != "short" or len(t.encode()) <= O.SHORT]
    if mix == "long":
        pool = [t for t in EDGE_TEXTS if t is None or len(t.encode()) > O.SHORT] + ["", "a"]
    n = 3000
    s = [pool[i] for i in rng.integers(0, len(pool), n)]
    groups = np.sort(rng.integers(0, 40, n))
    if mix == "mixed":  # the first half of the groups short only, the rest anything
        s = [
            t if g >= 20 or t is None or len(t.encode()) <= O.SHORT else "ab"
            for t, g in zip(s, groups)
        ]
    table = pa.table(
        {"g": groups, "id": np.arange(n), "s": pa.array(s, pa.string()), "v": rng.integers(0, 4, n)}
    )
    con = matchsql.connect(demo=False)
    con.sql("SET batch_size = 500")  # several calls: some over short strings only
    con.duckdb.register("src", table)
    for define in [
        "B.s = A.s AND B.v >= PREV(B.v)",
        "B.s >= A.s",
        "B.s < FIRST(B.s) OR B.s = A.s",
        "B.s <> A.s AND B.s > 'ab'",
    ]:
        sql = f"""SELECT * FROM src MATCH_RECOGNIZE (PARTITION BY g ORDER BY id
          MEASURES FIRST(A.id) AS a, COUNT(*) AS n, LAST(B.s) AS ls, FIRST(B.s) AS fs
          ONE ROW PER MATCH PATTERN (A B+) DEFINE B AS {define}) ORDER BY g, a"""
        assert_registers_equal_reference(con, sql, (mix, define))


def assert_registers_equal_reference(con, sql: str, what: object) -> None:
    """``sql`` runs on the registers path (EXPLAIN says so), with rows, and gives the
    reference path's rows."""
    got = {}
    for path in ("auto", "reference"):
        con.sql(f"SET execution_path = '{path}'")
        got[path] = con.sql(sql).fetchall()
    con.sql("SET execution_path = 'auto'")
    assert "path: registers" in [r[0] for r in con.sql("EXPLAIN " + sql).fetchall()]
    assert got["auto"] == got["reference"] and got["auto"], what
