"""The GPU path's ALL MATCHES records and unmatched rows as the CPU paths order them.

Plain array code (no device): hand-worked records in the order a walk finds
its ends, against the order the CPU paths output them in.
"""

from __future__ import annotations

import numpy as np

from matchsql.engine.gpu.selection import add_unmatched, every_end, exclusive_scan


def test_exclusive_scan_places_each_entry_after_the_ones_before() -> None:
    assert exclusive_scan(np.array([3, 0, 2, 1])).tolist() == [0, 3, 3, 5]
    assert exclusive_scan(np.zeros(0, np.int64)).tolist() == []


def _found() -> tuple[np.ndarray, ...]:
    # Start 1 found end 3 first (labels in slots 0-2), then end 2 (slots 3-4); start 4
    # found its one end, 4 (slot 5). A code is variable * 2 + excluded.
    kept = np.array([1, 4])
    counts = np.array([2, 1])
    rec = np.array([[3, 0], [2, 3], [4, 5]])
    codes = np.array([0, 2, 4, 0, 3, 2])
    return kept, counts, rec, codes


def test_every_end_orders_a_starts_matches_by_end_and_numbers_them() -> None:
    m = every_end(*_found(), first_number=10)
    assert m.starts.tolist() == [1, 1, 4]
    assert m.lengths.tolist() == [2, 3, 1]  # ends 2, 3, 4
    assert m.numbers.tolist() == [11, 12, 13]
    assert m.offsets.tolist() == [0, 2, 5]
    # End 2's labels (codes 0, 3), then end 3's (0, 2, 4), then start 4's (2).
    assert m.labels.tolist() == [0, 1, 0, 1, 2, 1]
    assert m.excluded.tolist() == [False, True, False, False, False, False]


def test_unmatched_rows_come_in_row_order_as_empty_matches() -> None:
    m = add_unmatched(every_end(*_found(), first_number=0), np.array([0, 6]))
    assert m.starts.tolist() == [0, 1, 1, 4, 6]
    assert m.lengths.tolist() == [0, 2, 3, 1, 0]
    assert m.numbers.tolist() == [0, 1, 2, 3, 0]
    assert m.unmatched.tolist() == [True, False, False, False, True]
    assert m.offsets.tolist() == [0, 0, 2, 5, 6]
    assert m.labels.tolist() == [0, 1, 0, 1, 2, 1]


def test_no_unmatched_rows_leave_the_matches_as_they_are() -> None:
    m = every_end(*_found(), first_number=0)
    assert add_unmatched(m, np.zeros(0, np.int64)) is m
