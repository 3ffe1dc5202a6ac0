"""Codes for the non-numeric columns that register conditions compare across rows.

The kernel's registers are row numbers and its operand stack holds ``float64``
values, so a condition such as ``B.origin = A.origin`` runs on the registers path
once every string (or date, timestamp, decimal, ...) it reads is an integer
code: equal codes for equal values and, where an ordering comparison reads the
column, codes in the values' order. Booleans are simply 0 and 1.

Codes are made per call of the kernel, over the rows that call is given (a
partition's buffer, a chunk's window, a batch of whole partitions), and only
have to be consistent within that call: the registers hold row numbers, never
values, and every call re-reads the rows it matches from the buffer it is given,
so a code never outlives the call that made it. That is what lets a live stream's
partition, which arrives in many batches, use codes made afresh for each run
(no dictionary that grows, nothing to recompute when a value sorts between two
known ones). Columns compared with each other share one dictionary (a *group*:
one per value type).
The GPU path's live ring keeps register values across batches; it reads
numeric columns only (:mod:`matchsql.engine.gpu.gpu_plan`).

Literals of a group (``A.origin = 'JFK'`` in a condition that also reads
another row) are compile-time constants of the bytecode, so their codes must not
depend on the call: literal ``i`` of the group's sorted literals has code
``(i + 1) * GAP``, and a column value that sorts between literals ``p - 1`` and
``p`` has code ``p * GAP + k`` with ``k >= 1`` its rank among the call's values
in that gap. A call never holds ``GAP`` distinct values, so the codes keep the
order (and equality) of the values and literals, and stay exact in a
``float64`` (below 2**53 for fewer than 2**21 literals).

Strings of at most :data:`SHORT` UTF-8 bytes need no dictionary when the group has no
literals: their bytes, big-endian, and their length packed into one integer (see
:func:`_pack`) are a code already, equal for equal strings and in their byte order,
and below 2**51, exact in a ``float64``. A call over short strings only (airport codes,
tickers, ISO codes) then codes its rows in one pass, with no hashing and no sort; a
longer string among them takes the whole call to the dictionary.

Ordering follows Arrow's sort: strings by their UTF-8 bytes, which is the order
of their code points (the reference's and DuckDB's default collation); dates,
times, timestamps, durations and decimals by value. Values of types a float
cannot hold exactly (a timestamp in nanoseconds, a DECIMAL(38)) are exact here
too: only their ranks reach the kernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

GAP = float(1 << 32)  # code distance between two literals of a group
MAX_LITERALS = 1 << 20
#: The longest strings (in UTF-8 bytes) coded without a dictionary: 6 bytes and a length of
#: 3 bits make 51 bits, which a ``float64`` holds exactly.
SHORT = 6
_NO_BITS = np.zeros(0, np.uint8)
_NO_DATA = np.zeros(1, np.uint8)


def group_of(t: pa.DataType) -> pa.DataType | None:
    """The type whose values share a dictionary with a column of type ``t`` (strings of
    any width share one), or None when the kernel cannot compare ``t`` through codes."""
    if (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or getattr(pa.types, "is_string_view", lambda _: False)(t)
    ):
        return pa.large_string()
    if pa.types.is_temporal(t) and not pa.types.is_interval(t) or pa.types.is_decimal(t):
        return t
    return None


def literal(value: Any, group: pa.DataType) -> Any:
    """``value`` as a value of ``group`` (a literal compared with its columns), or None
    when it is not one exactly (a comparison across types stays with the reference)."""
    if pa.types.is_large_string(group):
        return value if isinstance(value, str) else None
    if isinstance(value, bool | str | float):
        return None  # no implicit cast a float could round, nor text to parse
    try:
        got = pa.array([value], group)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        return None
    return value if got.null_count == 0 and got[0].as_py() == value else None


def literal_codes(literals: Sequence[Any], group: pa.DataType) -> dict[Any, float]:
    """Each literal's code: ``(i + 1) * GAP`` for the ``i``-th in the group's order."""
    values = list(dict.fromkeys(literals))
    order = pc.sort_indices(pa.array(values, group)).to_pylist()
    return {values[k]: (i + 1) * GAP for i, k in enumerate(order)}


def encode(
    arrays: Sequence[pa.Array | pa.ChunkedArray],
    group: pa.DataType,
    literals: Sequence[Any],
    ordered: bool,
) -> list[np.ndarray]:
    """``float64`` codes of each array's values (0 where NULL: the caller keeps the
    validity), one dictionary for all of them and the group's ``literals`` (their
    codes as :func:`literal_codes` gives them); in the values' order where
    ``ordered``."""
    parts = [a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays]
    if not literals:
        short = _short_codes(parts)
        if short is not None:
            return short
    # One dictionary needs one type: the group's, unless every part has the same already
    # (a cast copies a string column's offsets).
    target = parts[0].type if all(p.type == parts[0].type for p in parts) else group
    parts = [p if p.type == target else p.cast(target) for p in parts]
    lits = pa.array(list(dict.fromkeys(literals)), target)
    whole = pa.concat_arrays(parts) if len(parts) > 1 else parts[0]
    encoded = pc.dictionary_encode(whole)
    indices = encoded.indices.fill_null(0).to_numpy(zero_copy_only=False)
    entries = encoded.dictionary
    m = len(entries)
    if m == 0:  # NULLs only
        return [np.zeros(len(p), np.float64) for p in parts]
    if len(lits):
        # The literals join the (few) distinct values, not the rows: one dictionary of
        # both, whose first ``m`` entries stand for the values' own.
        both = pc.dictionary_encode(pa.concat_arrays([entries, lits]))
        of = both.indices.to_numpy(zero_copy_only=False)
        code = _codes(both.dictionary, ordered, of[m:], lits)[of[:m]]
    else:
        code = _codes(entries, ordered)
    codes = code[indices]
    out, at0 = [], 0
    for p in parts:
        out.append(codes[at0 : at0 + len(p)])
        at0 += len(p)
    return out


def _codes(
    entries: pa.Array, ordered: bool, at: np.ndarray | None = None, lits: pa.Array | None = None
) -> np.ndarray:
    """``float64`` code of each distinct value in ``entries``; ``at``: the entries of the
    (distinct) literals ``lits``, whose codes are fixed (see the module docstring)."""
    m = len(entries)
    if ordered:
        rank = np.empty(m, np.int64)
        rank[pc.sort_indices(entries).to_numpy()] = np.arange(m, dtype=np.int64)
    else:
        rank = np.arange(m, dtype=np.int64)
    code = rank + 1.0
    if at is None or lits is None:
        return code
    if ordered:
        lit_rank = np.sort(rank[at])
        gap = np.searchsorted(lit_rank, rank, side="right")  # literals at or below
        below = np.concatenate([[-1], lit_rank])[gap]
        return (gap * GAP + (rank - below)).astype(np.float64)
    # equality only: the values' codes stay below the first literal's
    code[at[pc.sort_indices(lits).to_numpy()]] = np.arange(1, len(lits) + 1) * GAP
    return code


def _short_codes(parts: Sequence[pa.Array]) -> list[np.ndarray] | None:
    """The codes of :func:`encode` without a dictionary, where every string of ``parts``
    has at most :data:`SHORT` bytes (see the module docstring); else None."""
    if not all(pa.types.is_string(p.type) or pa.types.is_large_string(p.type) for p in parts):
        return None
    out = []
    for p in parts:
        validity, offsets, data = p.buffers()
        width = np.int64 if pa.types.is_large_string(p.type) else np.int32
        at = (
            np.frombuffer(offsets, width, len(p) + 1, p.offset * width().itemsize)
            if len(p)
            else np.zeros(1, width)
        )
        bits = (
            np.frombuffer(validity, np.uint8) if validity is not None and p.null_count else _NO_BITS
        )
        codes = np.empty(len(p), np.float64)
        chars = np.frombuffer(data, np.uint8) if data is not None and data.size else _NO_DATA
        if not _pack(at, chars, bits, p.offset, codes):
            return None
        out.append(codes)
    return out


@njit(cache=True, nogil=True)
def _pack(
    offsets: np.ndarray, data: np.ndarray, bits: np.ndarray, bit_offset: int, codes: np.ndarray
) -> bool:
    """Each string's code, ``(bytes << 3 | length) + 1`` with its bytes big-endian and
    zero-padded to :data:`SHORT` (the length tells ``"a"`` from ``"a\\0"``), 0 where NULL
    (``bits``, Arrow's validity bitmap from bit ``bit_offset``; empty: no NULLs); False,
    the codes unfinished, at the first string longer than :data:`SHORT` bytes."""
    check = bits.shape[0] > 0
    for i in range(codes.shape[0]):
        if check:
            b = bit_offset + i
            if not (bits[b >> 3] >> (b & 7)) & 1:
                codes[i] = 0.0
                continue
        lo = offsets[i]
        n = offsets[i + 1] - lo
        if n > SHORT:
            return False
        key: int | np.int64 = 0  # below 2**51: an int64 (a uint64 converts to float more slowly)
        for j in range(SHORT):
            key = key << 8 | (np.int64(data[lo + j]) if j < n else 0)
        codes[i] = float(key << 3 | n) + 1.0
    return True
