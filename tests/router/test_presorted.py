"""Input already in ORDER BY order, grouped by partition without a sort
(execution/router/presorted.py).

The property: whenever :func:`grouped` returns rows, they are a permutation of
the input that DuckDB's ``ORDER BY <partition keys>, <order keys>`` could have
produced (same partition and key sequence as DuckDB's own sort, ties in input
order); and it returns None only when some partition really is out of order.
"""

from __future__ import annotations

import atexit
import math
import os
from contextlib import contextmanager, nullcontext
from functools import cache
from unittest.mock import patch

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matchsql.execution.router.presorted import (
    GroupedRows,
    OrderKey,
    batch_cuts,
    grouped,
    grouped_batches,
    grouped_rows,
    in_order,
    partition_codes,
)

SETTINGS = settings(
    max_examples=int(os.environ.get("PRESORTED_EXAMPLES", "150")),
    deadline=None,
    derandomize=not os.environ.get("PRESORTED_EXAMPLES"),
    suppress_health_check=[HealthCheck.too_slow],
)

PARTITION_TYPES = {"str": pa.string(), "int": pa.int64()}
ORDER_TYPES = {"int": pa.int32(), "float": pa.float64(), "ts": pa.timestamp("us")}


def _part_value(kind: str, v):
    if v is None:
        return None
    return ["b", "a", "ab", "", "é"][v] if kind == "str" else [3, -1, 0, 2**40, 7][v]


def _order_value(kind: str, v):
    if v is None:
        return None
    if kind == "float":
        return [-1.5, 0.0, -0.0, 2.0, math.nan, math.inf, -math.inf][v % 7]
    return v - 3


@st.composite
def tables(draw):
    """A random input with partition and order keys: sorted, almost sorted or unsorted."""
    n = draw(st.integers(0, 40))
    pkind = draw(st.sampled_from(sorted(PARTITION_TYPES)))
    okinds = draw(st.lists(st.sampled_from(sorted(ORDER_TYPES)), min_size=1, max_size=2))
    nparts = draw(st.sampled_from([0, 1, 2, 5]))  # 0: no PARTITION BY
    part = st.one_of(st.none(), st.integers(0, 4)) if nparts else st.none()
    rows = draw(
        st.lists(
            st.tuples(part, *[st.one_of(st.none(), st.integers(0, 9)) for _ in okinds]),
            min_size=n,
            max_size=n,
        )
    )
    keys = [OrderKey(f"k{i}", draw(st.booleans()), draw(st.booleans())) for i in range(len(okinds))]
    columns = {"p": pa.array([_part_value(pkind, r[0]) for r in rows], PARTITION_TYPES[pkind])}
    for i, kind in enumerate(okinds):
        values = [_order_value(kind, r[i + 1]) for r in rows]
        columns[f"k{i}"] = pa.array(values, pa.float64() if kind == "float" else pa.int64()).cast(
            ORDER_TYPES[kind]
        )
    columns["id"] = pa.array(range(n), pa.int64())
    table = pa.table(columns)
    mode = draw(st.sampled_from(["sorted", "almost", "unsorted"]))
    if mode != "unsorted" and n:
        # Globally in ORDER BY order, so every partition is (partitions interleave).
        order = _sql("SELECT id FROM data ORDER BY " + _order_sql(keys) + ", id", table)
        table = table.take(order.column("id"))
        if mode == "almost" and n > 1:
            i = draw(st.integers(0, n - 2))
            perm = list(range(n))
            perm[i], perm[i + 1] = perm[i + 1], perm[i]
            table = table.take(perm)
    partition_by = ["p"] if nparts else []
    return table, partition_by, keys


@cache
def _database() -> duckdb.DuckDBPyConnection:
    """One DuckDB for every :func:`_sql` (a database per call cost ~25 ms, hundreds of
    times per test); each call has a cursor of its own, where ``data`` is registered."""
    database = duckdb.connect()
    atexit.register(_database.cache_clear)  # gone before the bindings' leak check at exit
    return database


def _sql(query: str, data: pa.Table) -> pa.Table:
    con = _database().cursor()
    try:
        con.register("data", data)
        return con.sql(query).to_arrow_table()
    finally:
        con.close()


def _order_sql(keys: list[OrderKey]) -> str:
    return ", ".join(
        f"{k.column} {'DESC' if k.descending else 'ASC'} "
        f"NULLS {'FIRST' if k.nulls_first else 'LAST'}"
        for k in keys
    )


def _norm(v):
    """Key values as DuckDB compares them: -0.0 = 0.0, NaN = NaN."""
    if isinstance(v, float):
        return "NaN" if math.isnan(v) else v + 0.0
    return v


def _keys(table: pa.Table, names: list[str]) -> list[tuple]:
    cols = [table.column(n).to_pylist() for n in names]
    return [tuple(_norm(c[i]) for c in cols) for i in range(table.num_rows)]


def _duckdb_sorted(table: pa.Table, partition_by: list[str], keys: list[OrderKey]) -> pa.Table:
    order = ", ".join(partition_by + [_order_sql(keys)])
    return _sql(f"SELECT * FROM data ORDER BY {order}", table)


def _per_partition(table: pa.Table, partition_by: list[str], keys: list[OrderKey]) -> dict:
    parts = _keys(table, partition_by) if partition_by else [()] * table.num_rows
    out: dict = {}
    for part, key in zip(parts, _keys(table, [k.column for k in keys])):
        out.setdefault(part, []).append(key)
    return out


def _partitions_in_order(table: pa.Table, partition_by: list[str], keys: list[OrderKey]) -> bool:
    """Whether each partition's rows, in table order, have the key sequence DuckDB's sort
    gives that partition."""
    return _per_partition(table, partition_by, keys) == _per_partition(
        _duckdb_sorted(table, partition_by, keys), partition_by, keys
    )


@contextmanager
def compiled_from(rows: int):
    """The grouping's compiled passes from ``rows`` rows on (0: always, as on large
    inputs; the tests' small tables otherwise take numpy's passes)."""
    with (
        patch("matchsql.execution.router.grouping.COMPILED_FROM_ROWS", rows),
        patch("matchsql.execution.router.presorted.COMPILED_FROM_ROWS", rows),
    ):
        yield


def _both_passes(compute):
    """``compute()`` by the compiled passes and by numpy's, which must agree (the same
    rows in the same order: the same ``id`` sequence, ids being unique)."""
    with compiled_from(0):
        compiled = compute()
    plain = compute()
    assert (compiled is None) == (plain is None)
    assert compiled is None or compiled.column("id").equals(plain.column("id"))
    return compiled


@SETTINGS
@given(tables())
def test_grouped_is_an_order_duckdb_could_give(case):
    table, partition_by, keys = case
    rows = _both_passes(lambda: grouped(table, partition_by, keys))
    if rows is None:
        assert not _partitions_in_order(table, partition_by, keys)
        return
    assert rows.num_rows == table.num_rows
    assert sorted(rows.column("id").to_pylist()) == list(range(table.num_rows))
    reference = _duckdb_sorted(table, partition_by, keys)
    names = partition_by + [k.column for k in keys]
    assert _keys(rows, names) == _keys(reference, names)
    # Ties (equal partition and order keys) keep their input order.
    position = {v: i for i, v in enumerate(table.column("id").to_pylist())}
    ids = rows.column("id").to_pylist()
    tied = _keys(rows, names)
    for i in range(1, len(ids)):
        if tied[i] == tied[i - 1]:
            assert position[ids[i]] > position[ids[i - 1]]


@SETTINGS
@given(tables())
def test_the_order_check_alone_says_whether_each_partition_is_in_order(case):
    """in_order (the first rows' check): for input stored in the order of its one ORDER BY
    key as a whole it answers without numbering the partitions; both ways it agrees with
    DuckDB's sort."""
    table, partition_by, keys = case
    for compiled in (False, True):
        assert in_order(table, partition_by, keys, compiled) == _partitions_in_order(
            table, partition_by, keys
        )


@pytest.mark.parametrize(
    "ts,descending,ok",
    [
        ([1, 2, 3, 4, 5, 6], False, True),  # in order as a whole
        ([1, 2, 2, 2, 5, 9], False, True),  # ties
        ([9, 5, 2, 2, 2, 1], True, True),
        ([1, 5, 2, 4, 6, 3], False, True),  # not as a whole, but within each partition
        ([1, 5, 3, 4, 2, 6], False, False),  # b (rows 1 and 4): 5 then 2
        ([4, 2, 3, 1, 5, 6], False, False),  # a (rows 0 and 3): 4 then 1
        ([1, 2, 3, 4, 5, 6], True, False),
    ],
)
def test_the_order_check_of_one_key_without_nulls(ts, descending, ok):
    """Partitions a b c a b c: in order as a whole (answered without numbering the
    partitions), or partition by partition."""
    table = pa.table({"p": pa.array(["a", "b", "c"] * 2), "ts": pa.array(ts, pa.int64())})
    assert in_order(table, ["p"], [OrderKey("ts", descending=descending)]) is ok


@SETTINGS
@given(tables())
def test_partition_grouping_without_order_by_is_stable(case):
    table, partition_by, _ = case
    if not partition_by:
        return
    rows = grouped(table, partition_by, [])
    assert rows is not None
    reference = _sql(
        "SELECT * FROM (SELECT *, row_number() OVER () AS pos FROM data) ORDER BY p, pos", table
    )
    assert rows.column("id").to_pylist() == reference.column("id").to_pylist()


def test_unsupported_key_types_are_left_to_the_sort():
    table = pa.table({"p": pa.array([1.0, 2.0]), "k": pa.array([1, 2])})
    assert grouped(table, ["p"], [OrderKey("k")]) is None  # float partition: -0.0 = 0.0
    table = pa.table({"p": pa.array([1, 1]), "k": pa.array(["a", "b"])})
    assert grouped(table, ["p"], [OrderKey("k")]) is None  # string ORDER BY
    assert in_order(table, ["p"], [OrderKey("k")]) is None
    table = pa.table({"k": pa.array([2**63, 2**64 - 1], pa.uint64())})
    assert grouped(table, [], [OrderKey("k")]) is None


def test_partition_codes_follow_duckdb_order_with_nulls_last():
    table = pa.table({"a": pa.array(["b", None, "a", "b"]), "b": pa.array([2, 1, None, 1])})
    codes, count = partition_codes(table, ["a", "b"])
    # (a, b) ascending, NULLs last: ('a', NULL) < ('b', 1) < ('b', 2) < (NULL, 1)
    assert codes.tolist() == [2, 3, 0, 1] and count == 4


def test_grouped_input_keeps_its_rows_without_a_copy():
    table = pa.table({"p": ["x"] * 5 + ["y"] * 5, "k": np.arange(10)})
    assert grouped(table, ["p"], [OrderKey("k")]) is table


@pytest.mark.parametrize(
    "descending,nulls_first,values,ok",
    [
        (False, False, [1, 2, None], True),
        (False, False, [None, 1, 2], False),
        (False, True, [None, 1, 2], True),
        (True, False, [2, 1, None], True),
        (True, False, [1, 2], False),
        (True, True, [None, 2, 2, 1], True),
    ],
)
def test_null_placement_and_direction(descending, nulls_first, values, ok):
    table = pa.table({"k": pa.array(values, pa.int64())})
    assert (grouped(table, [], [OrderKey("k", descending, nulls_first)]) is not None) is ok


def test_more_partitions_than_the_radix_sort_takes_are_left_to_the_sort(monkeypatch):
    table = pa.table({"p": pa.array([2, 1, 2, 1]), "k": pa.array([1, 2, 3, 4])})
    assert grouped(table, ["p"], [OrderKey("k")]).column("k").to_pylist() == [2, 4, 1, 3]
    monkeypatch.setattr("matchsql.execution.router.presorted.MAX_PARTITIONS", 1)
    assert grouped(table, ["p"], [OrderKey("k")]) is None


@pytest.mark.parametrize("key_type", [pa.string(), pa.large_string(), pa.int32()])
def test_grouped_batches_are_the_sorted_rows_in_small_batches(key_type):
    """Batches taken one at a time (the partition column rebuilt from its values by
    partition): together, exactly DuckDB's sorted rows, NULL partition last."""
    rng = np.random.default_rng(5)
    n = 500
    parts = rng.integers(0, 7, n)
    keys = [None if p == 6 else (p * 11 if key_type == pa.int32() else f"s{p}é") for p in parts]
    table = pa.table(
        {
            "p": pa.array(keys, key_type),
            "k": pa.array(np.arange(n) * 3),
            "x": pa.array(rng.integers(0, 100, n)),
        }
    )
    batches = list(grouped_batches(table, ["p"], [OrderKey("k")], 37))
    assert max(b.num_rows for b in batches) == 37 and sum(b.num_rows for b in batches) == n
    assert all(b.schema.equals(table.schema) for b in batches)
    expected = _sql("SELECT * FROM data ORDER BY p NULLS LAST, k", table)
    got = pa.Table.from_batches(batches)
    assert got.column("p").to_pylist() == expected.column("p").to_pylist()
    assert got.column("k").to_pylist() == expected.column("k").to_pylist()
    assert got.column("x").to_pylist() == expected.column("x").to_pylist()
    table = table.slice(0, n - 1).append_column("q", pa.array(parts[: n - 1]))
    assert grouped_batches(table, ["p", "q"], [OrderKey("k", descending=True)], 37) is None


def test_grouped_batches_keep_columns_whose_names_repeat():
    """A join's input may repeat a column name: every column is still taken by position."""
    table = pa.Table.from_arrays(
        [
            pa.array(["b", "a", "b", "a"]),
            pa.array([1, 2, 3, 4]),
            pa.array([9, 8, 7, 6]),
            pa.array(["x", "y", "z", "w"]),
        ],
        names=["p", "k", "x", "x"],
    )
    rows = pa.Table.from_batches(list(grouped_batches(table, ["p"], [OrderKey("k")], 3)))
    assert rows.schema.names == ["p", "k", "x", "x"]
    assert [c.to_pylist() for c in rows.columns] == [
        ["a", "a", "b", "b"],
        [2, 4, 1, 3],
        [8, 6, 9, 7],
        ["y", "w", "x", "z"],
    ]


@SETTINGS
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.sampled_from(["b", "a", "é", ""])),
            st.one_of(st.none(), st.integers(-2, 2)),
        ),
        max_size=40,
    ),
    st.booleans(),
)
def test_two_partition_keys_are_rebuilt_with_their_values(rows, runs):
    # Rows in time order (k), partitions interleaved or (runs) stored one after another:
    # the grouped key columns, rebuilt from their distinct values, hold DuckDB's rows.
    if runs:
        rows = sorted(rows, key=lambda r: (r[0] is None, r[0] or "", r[1] is None, r[1] or 0))
    table = pa.table(
        {
            "p": pa.array([r[0] for r in rows], pa.string()),
            "q": pa.array([r[1] for r in rows], pa.int8()),
            "k": pa.array(range(len(rows)), pa.int64()),
        }
    )
    got = grouped(table, ["p", "q"], [OrderKey("k")])
    assert got is not None and got.schema == table.schema
    expected = _sql("SELECT * FROM data ORDER BY p, q, k", table)
    assert got.to_pylist() == expected.to_pylist()


_STRINGS = [
    "b",
    "a",
    "",
    "é",
    "abcdefg",
    "abcdefgh",
    "abcdefg\x00",
    "\x00",
    "a\x00",
    "a long partition key",
]


@SETTINGS
@given(
    st.lists(st.one_of(st.none(), st.sampled_from(_STRINGS)), min_size=1, max_size=60),
    st.integers(0, 5),
    st.booleans(),
    st.sampled_from([pa.string(), pa.large_string()]),
)
def test_string_partition_codes_are_duckdbs_dense_rank(values, cut, chunked, type_):
    """Strings of up to 7 bytes are encoded by a compiled pass (with a NUL byte, the empty
    string and a longer string that makes it give up in between): each row's code is
    its partition's rank in DuckDB's ORDER BY, NULL last, on sliced and chunked input."""
    column = pa.array(["pad"] * cut + values, type_).slice(cut)
    if chunked and len(values) > 1:
        column = pa.chunked_array(
            [column.slice(0, len(values) // 2), column.slice(len(values) // 2)]
        )
    table = pa.table({"p": column, "id": pa.array(range(len(values)))})
    expected = (
        _sql(
            "SELECT dense_rank() OVER (ORDER BY p NULLS LAST) - 1 AS r, id FROM data ORDER BY id",
            table,
        )
        .column("r")
        .to_pylist()
    )
    for rows in (0, None):  # the compiled pass, then Arrow's dictionary_encode
        with compiled_from(rows) if rows is not None else nullcontext():
            codes, count = partition_codes(table, ["p"])
        assert codes.tolist() == expected and count == max(expected) + 1


def test_more_distinct_short_strings_than_partitions_are_counted_by_arrow(monkeypatch):
    monkeypatch.setattr("matchsql.execution.router.presorted.MAX_PARTITIONS", 3)
    table = pa.table({"p": pa.array(["d", "c", "b", "a", "c", None])})
    codes, count = partition_codes(table, ["p"])
    assert codes.tolist() == [3, 2, 1, 0, 2, 4] and count == 5


def test_unread_columns_come_as_nulls_only_where_rows_are_regrouped():
    table = pa.table({"p": ["b", "a", "b", "a"], "k": [1, 2, 3, 4], "x": [9, 8, 7, 6]})
    rows = pa.Table.from_batches(
        list(grouped_batches(table, ["p"], [OrderKey("k")], 3, frozenset({"k"})))
    )
    assert rows.schema == table.schema
    assert rows.column("p").to_pylist() == ["a", "a", "b", "b"]
    assert rows.column("x").to_pylist() == [8, 6, 9, 7]
    assert rows.column("k").null_count == 4  # checked in order, then not taken
    ordered = table.take([1, 3, 0, 2])  # grouped already: the rows as they are
    rows = pa.Table.from_batches(
        list(grouped_batches(ordered, ["p"], [OrderKey("k")], 3, frozenset({"k"})))
    )
    assert rows.equals(ordered)


@SETTINGS
@given(st.lists(st.integers(1, 60), min_size=1, max_size=30), st.integers(1, 50))
def test_batches_are_cut_where_partitions_end(sizes, batch_size):
    """Batches cover the rows in order, each at most ``batch_size`` rows; one that does not
    end where a partition ends is full (a longer partition is cut), and none but the
    last is shorter than half a batch."""
    ends = np.cumsum(sizes)
    cuts = list(batch_cuts(ends, batch_size))
    assert cuts[0][0] == 0 and cuts[-1][1] == ends[-1]
    assert all(a[1] == b[0] for a, b in zip(cuts, cuts[1:]))
    for start, stop in cuts:
        assert 0 < stop - start <= batch_size
        assert stop in ends or stop - start == batch_size
    assert all(stop - start >= batch_size // 2 for start, stop in cuts[:-1])
    # a batch ends at a partition end whenever one lies in its second half
    for start, stop in cuts[:-1]:
        if stop not in ends:
            assert not any(start + max(batch_size // 2, 1) <= e <= start + batch_size for e in ends)


@pytest.mark.parametrize("kind", ["str", "int"])
def test_grouping_on_two_threads_is_the_grouping_on_one(kind) -> None:
    """Past PARALLEL_FROM_ROWS rows the encoding, the order check and the counting sort
    run in spans on threads (the compiled string pass too): the same grouping."""
    rng = np.random.default_rng(5)
    n = 300_000
    keys = rng.integers(0, 700, n)
    column = (
        pa.array([None if k % 97 == 0 else f"s{k}" for k in keys.tolist()])
        if kind == "str"
        else pa.array(np.where(keys % 97 == 0, None, keys).tolist(), pa.int64())
    )
    table = pa.table({"p": column, "ts": np.arange(n), "v": rng.random(n)})
    one = grouped_rows(table, ["p"], [OrderKey("ts")])
    two = grouped_rows(table, ["p"], [OrderKey("ts")], threads=2)
    assert isinstance(one, GroupedRows) and isinstance(two, GroupedRows)
    assert np.array_equal(one.perm, two.perm) and np.array_equal(one.ends, two.ends)
    assert one.keys[0].to_pylist() == two.keys[0].to_pylist()
    # One partition's first row past the middle goes back before its last row before the
    # middle: out of order only across the spans' edge.
    key = keys[n // 2]
    same = np.flatnonzero(keys == key)
    before, after = same[same < n // 2][-1], same[same >= n // 2][0]
    ts = np.arange(n)
    ts[after] = ts[before] - 1
    back = table.set_column(1, "ts", pa.array(ts))
    assert grouped_rows(back, ["p"], [OrderKey("ts")]) is None
    assert grouped_rows(back, ["p"], [OrderKey("ts")], threads=2) is None
