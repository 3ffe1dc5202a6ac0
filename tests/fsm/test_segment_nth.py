"""The k-th first/last label of a variable in each match (FINAL ``FIRST``/``LAST`` with
an offset): the compiled walk (:func:`segment_nth_of`) against a plain Python one and
against the prefix-count version (:func:`segment_nth`) over random matches."""

from __future__ import annotations

import numpy as np
import pytest

from matchsql.engine.compiled.match_arrays import Matches
from matchsql.engine.compiled.segment_reductions import segment_nth, segment_nth_of


def _matches(rng: np.random.Generator, n_matches: int, n_vars: int, gap: bool) -> Matches:
    """Random matches (empty ones too), their labels laid out one after another, or with
    unread labels between them (``gap``: a block of a larger chunk)."""
    lengths = rng.integers(0, 8, n_matches).astype(np.int64)
    spaces = rng.integers(0, 3, n_matches) if gap else np.zeros(n_matches, np.int64)
    offsets = (np.cumsum(lengths + spaces) - lengths).astype(np.int64)
    size = int(offsets[-1] + lengths[-1]) if n_matches else 0
    labels = rng.integers(0, n_vars, size).astype(np.int64)
    starts = np.arange(n_matches, dtype=np.int64) * 10
    return Matches(starts, lengths, np.arange(1, n_matches + 1), labels, offsets)


def _plain(m: Matches, ids: set[int], last: bool, k: int) -> list[int]:
    out = []
    for lo, n in zip(m.offsets.tolist(), m.lengths.tolist()):
        hits = [i for i in range(lo, lo + n) if int(m.labels[i]) in ids]
        if last:
            hits.reverse()
        out.append(hits[k] if 0 <= k < len(hits) else -1)
    return out


@pytest.mark.parametrize("seed", range(40))
def test_nth_of_matches_a_plain_walk(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_vars = int(rng.integers(1, 5))
    m = _matches(rng, int(rng.integers(0, 30)), n_vars, gap=bool(seed % 2))
    for _ in range(10):
        ids = np.unique(rng.integers(0, n_vars + 1, int(rng.integers(1, 4))))
        last = bool(rng.integers(0, 2))
        k = int(rng.choice([0, 0, 1, 2, 5, 10**8]))
        got = segment_nth_of(m, ids, last, k)
        assert got.dtype == np.int64
        assert got.tolist() == _plain(m, set(ids.tolist()), last, k), (ids, last, k)
        if not seed % 2:  # segment_nth reads every label: no gaps between matches
            assert got.tolist() == segment_nth(m, np.isin(m.labels, ids), last, k).tolist()


def test_no_labels_or_no_variables_find_nothing() -> None:
    empty = Matches(
        np.array([3], np.int64),
        np.zeros(1, np.int64),
        np.ones(1, np.int64),
        np.zeros(0, np.int64),
        np.zeros(1, np.int64),
    )
    assert segment_nth_of(empty, np.array([0]), True, 0).tolist() == [-1]
    m = _matches(np.random.default_rng(1), 5, 2, gap=False)
    assert segment_nth_of(m, np.zeros(0, np.int64), False, 0).tolist() == [-1] * 5
