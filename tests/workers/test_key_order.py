"""A continuous query's matches put back in the order of its keys' first appearance.

Each worker answers a batch with one joined batch of matches and an entry per
key it was sent, in the order it was sent: the router then places every key's
rows from its worker's position alone (matchsql/execution/workers/stream_router.py).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import matchsql
from matchsql.execution.workers.stream_router import _in_key_order


def _answer(rows: list[tuple[str, int]]) -> tuple[list[tuple], list[pa.RecordBatch]]:
    """A worker's answer: per key (in the order sent) its entry, its matches joined."""
    keys: dict[str, int] = {}
    for key, _ in rows:
        keys[key] = keys.get(key, 0) + 1
    entries = [((key,), n, None, 0) for key, n in keys.items()]
    batch = pa.RecordBatch.from_pydict({"k": [k for k, _ in rows], "v": [v for _, v in rows]})
    return entries, [batch] if rows else []


def test_every_keys_rows_come_in_the_order_the_keys_first_appeared():
    # Keys a..e first appeared in that order; a, c go to worker 1, b, d, e to worker 0.
    owners = np.array([1, 0, 1, 0, 0])
    answers = {
        0: _answer([("b", 1), ("b", 2), ("d", 3), ("e", 4), ("e", 5), ("e", 6)]),
        1: _answer([("a", 7), ("c", 8), ("c", 9)]),
    }
    got = _in_key_order(owners, answers)
    assert got.to_pydict() == {
        "k": ["a", "b", "b", "c", "c", "d", "e", "e", "e"],
        "v": [7, 1, 2, 8, 9, 3, 4, 5, 6],
    }


def test_keys_without_matches_and_a_worker_without_any():
    owners = np.array([0, 1, 0])
    empty = ([((k,), 0, None, 0) for k in ("b",)], [])
    answers = {
        1: empty,
        0: ([(("a",), 2, None, 0), (("c",), 0, None, 0)], _answer([("a", 1), ("a", 2)])[1]),
    }
    assert _in_key_order(owners, answers).to_pydict() == {"k": ["a", "a"], "v": [1, 2]}
    assert (
        _in_key_order(owners, {0: ([(("a",), 0, None, 0), (("c",), 0, None, 0)], []), 1: empty})
        is None
    )


def test_an_answer_for_other_keys_than_sent_is_an_error_not_wrong_rows():
    owners = np.array([0, 1, 0])
    answers = {0: _answer([("a", 1)]), 1: _answer([("b", 2)])}  # worker 0 was sent two keys
    with pytest.raises(matchsql.Error, match="internal error"):
        _in_key_order(owners, answers)
