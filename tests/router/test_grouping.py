"""The grouping's passes (execution/router/grouping.py), compiled and numpy's, against numpy's own
sorts and against each other; on several threads against one."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from matchsql.execution.router.grouping import (
    SHORT,
    CountingSort,
    each_partition_in_order,
    parallel_in_order,
    partitions_in_order,
    short_string_codes,
)
from matchsql.execution.router.partitions import group_order
from matchsql.execution.router.presorted import _distinct_span, _joined, _string_buffers


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.integers(0, 6), max_size=80))
def test_grouping_order_is_the_stable_sort_of_the_codes(values):
    codes = np.array(values, np.int64)
    count = 7
    expected = np.argsort(codes, kind="stable")
    compiled = CountingSort.of(codes, count, 2, least=1)  # compiled passes, in spans
    numpys = group_order(codes, count)  # numpy's (a small input)
    for perm, starts, grouped in (numpys, (compiled.perm, compiled.starts, compiled.grouped)):
        assert grouped == bool(np.all(codes[1:] >= codes[:-1]))
        assert (np.arange(len(codes)) if grouped else perm).tolist() == expected.tolist()
        assert starts.tolist() == [0, *np.cumsum(np.bincount(codes, minlength=count)).tolist()]
    first = {c: values.index(c) for c in set(values)}
    assert compiled.firsts.tolist() == [first.get(c, -1) for c in range(count)]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.one_of(st.none(), st.integers(0, 3)), st.integers(0, 3)),
        max_size=30,
    ),
    st.booleans(),
)
def test_partitions_in_order_compares_rows_of_one_partition(rows, nulls_first):
    """Two keys, the first with NULLs: each partition's rows in input order must not go
    down in (key 1 with its NULL placement, key 2); ties are in order."""
    codes = np.array([r[0] for r in rows], np.int64)
    values = np.array([[r[1] or 0 for r in rows], [r[2] for r in rows]], np.int64).reshape(2, -1)
    nulls = np.array([[r[1] is None for r in rows], [False] * len(rows)], bool).reshape(2, -1)

    def sort_key(r):
        null = r[1] is None
        return (not null if nulls_first else null, r[1] or 0, r[2])

    expected = all(
        [sort_key(r) for r in rows if r[0] == p] == sorted(sort_key(r) for r in rows if r[0] == p)
        for p in range(3)
    )
    for check in (partitions_in_order, each_partition_in_order):  # compiled; numpy's
        got = check(codes, 3, values, nulls, np.array([nulls_first, False]))
        assert got == expected
        if not any(r[1] is None for r in rows):  # no NULLs: the flags may be left out
            assert (
                check(codes, 3, values, np.zeros((2, 0), bool), np.array([nulls_first, False]))
                == expected
            )


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.lists(st.integers(0, 3), max_size=20))
def test_no_codes_is_one_partition(keys):
    values = np.array(keys, np.int64).reshape(1, -1)
    expected = keys == sorted(keys)
    for codes in (np.zeros(0, np.int64), np.zeros(len(keys), np.int64)):
        for check in (partitions_in_order, each_partition_in_order):
            assert check(codes, 1, values, np.zeros((1, 0), bool), np.zeros(1, bool)) == expected


# -- the passes on several threads: spans of rows, joined ----------------------------------


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.integers(0, 6), max_size=80), st.integers(1, 4), st.integers(1, 9))
def test_group_order_in_spans_is_the_same_stable_sort(values, threads, least):
    codes = np.array(values, np.int64)
    expected = group_order(codes, 7)
    sort = CountingSort.of(codes, 7, threads, least)
    perm, starts, grouped = sort.perm, sort.starts, sort.grouped
    assert grouped == expected[2]
    assert perm.tolist() == expected[0].tolist()
    assert starts.tolist() == expected[1].tolist()


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.lists(st.tuples(st.integers(0, 2), st.one_of(st.none(), st.integers(0, 3))), max_size=40),
    st.booleans(),
    st.integers(1, 4),
    st.integers(1, 6),
    st.booleans(),
)
def test_order_check_in_spans_agrees(rows, nulls_first, threads, least, one_partition):
    """Rows out of order only across a span's edge (a partition's last row in one span,
    its next row in a later one, maybe with spans between) are found too."""
    codes = np.zeros(0, np.int64) if one_partition else np.array([r[0] for r in rows], np.int64)
    values = np.array([r[1] or 0 for r in rows], np.int64).reshape(1, -1)
    nulls = np.array([r[1] is None for r in rows], bool).reshape(1, -1)
    flags = np.array([nulls_first])
    count = 1 if one_partition else 3
    expected = each_partition_in_order(codes, count, values, nulls, flags)
    assert parallel_in_order(codes, count, values, nulls, flags, threads, least) == expected


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.lists(
        st.one_of(st.none(), st.sampled_from(["a", "bb", "c", "dd", "e"])), min_size=1, max_size=60
    ),
    st.integers(1, 5),
    st.booleans(),
)
def test_distinct_values_of_spans_join_into_those_of_the_whole(values, parts, integers):
    """Each span's dictionary (first appearance order) joined: the whole column's."""
    column = (
        pa.array([None if v is None else ord(v[0]) * len(v) for v in values])
        if integers
        else pa.array(values, pa.string())
    )
    cuts = sorted({0, len(values), *(len(values) * k // parts for k in range(parts))})
    encoded = [_distinct_span(column.slice(a, b - a)) for a, b in zip(cuts[:-1], cuts[1:])]
    joined = _joined(encoded)
    whole = _distinct_span(column)
    assert joined.dictionary.to_pylist() == whole[0].to_pylist()
    numbered = np.append(np.arange(len(whole[0])), -1)  # each value's number, NULL -1
    assert joined.codes(numbered).tolist() == np.where(whole[1] < 0, -1, whole[1]).tolist()
    assert joined.has_null == whole[2]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.lists(st.integers(0, 6), max_size=80),
    st.integers(1, 4),
    st.integers(1, 9),
    st.lists(st.integers(0, 80), max_size=5),
)
def test_scattered_values_are_the_values_taken_through_the_permutation(
    values, threads, least, cuts
):
    """The column comes in chunks (the export's batches), cut anywhere against the
    threads' spans of rows."""
    codes = np.array(values, np.int64)
    sort = CountingSort.of(codes, 7, threads, least)
    column = np.arange(len(codes), dtype=np.int64) * 3 + 1
    out = np.empty_like(column)
    edges = sorted({0, len(codes), *(min(cut, len(codes)) for cut in cuts)})
    sort.scatter([column[a:b] for a, b in zip(edges[:-1], edges[1:])], out)
    order = np.arange(len(codes)) if sort.grouped else sort.perm
    assert out.tolist() == column[order].tolist()


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.lists(
        st.one_of(st.none(), st.text("ab\u00e9\x00z", max_size=SHORT + 1)), min_size=1, max_size=60
    ),
    st.integers(0, 5),
    st.integers(0, 5),
)
def test_short_strings_are_numbered_as_dictionary_encode_numbers_them(values, head, tail):
    """The compiled encoding of a string column (read word by word where it can, byte by
    byte near the buffer's end) against Arrow's, on a slice of the column (offsets and
    validity bits not from its start); a string longer than SHORT bytes gives up."""
    column = pa.array(values, pa.string())
    column = column.slice(min(head, len(column) - 1))
    column = column.slice(0, max(1, len(column) - tail))
    codes, firsts, has_null, done = short_string_codes(*_string_buffers(column), 1 << 16)
    if any(v is not None and len(v.encode()) > SHORT for v in column.to_pylist()):
        assert not done
        return
    assert done
    encoded = pa.compute.dictionary_encode(column)
    expected = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False)
    assert codes.tolist() == expected.tolist()
    assert column.take(pa.array(firsts)).to_pylist() == encoded.dictionary.to_pylist()
    assert has_null == (column.null_count > 0)
