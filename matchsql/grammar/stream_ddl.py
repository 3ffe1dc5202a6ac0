"""The nodes of ``CREATE STREAM``, ``DROP STREAM`` and ``SHOW STREAMS``, and the rules
their values follow.

    CREATE STREAM [IF NOT EXISTS] name (column type, ...)
        [WITH (capacity = N, on_full = 'block' | 'spill',
               max_spill = <bytes: 1e9, 512 MiB, '2 GB'>,     (on_full = 'spill' only)
               archive = '<DuckDB table or Parquet directory>',
               archive_filter = '<SQL predicate>')]
    DROP STREAM [IF EXISTS] name
    SHOW STREAMS
    SHOW STREAM READERS [name]      one row per reader: cursor, lag, archive writer

These are not DuckDB statements: the session classifies them by their
first words (matchsql.session.statement_kinds) and the matchsql dialect's parser
reads them (:mod:`matchsql.grammar.ddl_parser`; errors point at the offending
token) into the nodes below. The rules live here, not in the parser, because
the Python API and the stream storage check the same values. Column types
are kept as written and validated later by asking DuckDB
(``CAST(NULL AS type)``), so every DuckDB type name works and
the stream's Arrow schema is exactly what DuckDB would produce.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from typing import TypedDict, cast

from sqlglot import exp

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}\Z")
#: The one rule for stream names, in SQL and in the Python API (a name becomes a file
#: name in the stream registry: no '/', no '..').
NAME_RULE = "a stream name is a letter or '_' followed by up to 62 letters, digits or '_'"


def is_stream_name(name: object) -> bool:
    """Whether ``name`` is a valid stream name (:data:`NAME_RULE`)."""
    return isinstance(name, str) and _NAME.match(name) is not None


OPTIONS = ("capacity", "on_full", "max_spill", "archive", "archive_filter")
#: A ring holds at most this many tuples (its segment is also held to the shared memory
#: there is: matchsql.storage.shm_ring).
MAX_CAPACITY = 1 << 30
#: What a writer does when the ring is full: wait for readers, or spill to Parquet files.
ON_FULL = ("block", "spill")
CAPACITY_RULE = f"capacity is a whole number of tuples from 1 to {MAX_CAPACITY:,}"


def is_capacity(value: object) -> bool:
    """Whether ``value`` is a capacity :data:`CAPACITY_RULE` allows (SQL and Python)."""
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_CAPACITY


#: The range of ``max_spill``, the bytes of spill files a ``spill`` stream may hold
#: (the same rule in SQL and in the Python API). Below 64 KiB not even a small spill
#: file fits; 1 EiB is far beyond any disk and keeps byte counts exact in an int64.
MAX_SPILL_MIN = 64 * 1024
MAX_SPILL_MAX = 1 << 60
MAX_SPILL_RULE = (
    f"max_spill is a number of bytes from {MAX_SPILL_MIN:,} (64 KiB) to "
    f"{MAX_SPILL_MAX:,} (1 EiB), e.g. 1e9, 512 MiB or '2 GB'"
)
#: Size units: decimal (kB = 1000 B, as DuckDB's memory_limit) and binary (KiB = 1024 B).
SIZE_UNITS = {
    "": 1,
    "b": 1,
    "bytes": 1,
    **{f"{p}b": 1000 ** (i + 1) for i, p in enumerate("kmgtpe")},
    **{f"{p}ib": 1024 ** (i + 1) for i, p in enumerate("kmgtpe")},
}
_SIZE = re.compile(r"\s*((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*([A-Za-z]*)\s*\Z")


def spill_limit(value: object) -> int:
    """``value`` (a number of bytes, or text such as ``'512 MiB'``) as whole bytes.

    One check for SQL and the Python API, so a limit that cannot mean what
    its writer meant never gets recorded: a number that rounds to 0 bytes (which
    would refuse every spill) or to infinity (which is no limit), and anything
    outside :data:`MAX_SPILL_RULE`'s range, raise ValueError saying why.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"max_spill takes a number of bytes, not {value!r}; {MAX_SPILL_RULE}")
    if isinstance(value, str):
        match = _SIZE.match(value)
        unit = SIZE_UNITS.get(match.group(2).lower()) if match else None
        if match is None or unit is None:
            raise ValueError(f"max_spill = {value!r} is not a size; {MAX_SPILL_RULE}")
        try:
            number = Decimal(match.group(1)) * unit
        except (InvalidOperation, ArithmeticError):  # beyond what Decimal holds: infinite
            number = Decimal("Infinity")
    else:
        number = Decimal(value)
    shown = f"{number:.3e}" if isinstance(value, int) and value.bit_length() > 64 else value
    if number.is_nan():
        raise ValueError(f"max_spill = {shown} is not a number; {MAX_SPILL_RULE}")
    if not number.is_finite() or math.isinf(float(number)):
        raise ValueError(
            f"max_spill = {shown} is too large: it rounds to infinity; {MAX_SPILL_RULE}"
        )
    if number > MAX_SPILL_MAX * 2:  # out of range; not worth an exact (huge) integer
        raise ValueError(f"max_spill = {shown} is out of range; {MAX_SPILL_RULE}")
    rounded = int(number.to_integral_value())
    if rounded == 0 and number >= 0:
        raise ValueError(f"max_spill = {shown} rounds to 0 bytes; {MAX_SPILL_RULE}")
    if not MAX_SPILL_MIN <= rounded <= MAX_SPILL_MAX:
        raise ValueError(f"max_spill = {shown} is out of range; {MAX_SPILL_RULE}")
    return rounded


RESERVED_COLUMNS = ("_seq",)


class StreamOptions(TypedDict, total=False):
    """The ``WITH (...)`` of ``CREATE STREAM``, as the parser checked it: a missing key
    takes :func:`~matchsql.storage.stream_lifecycle.create_stream`'s default."""

    capacity: int
    on_full: str
    max_spill: int
    archive: str
    archive_filter: str


class CreateStream(exp.Expression):
    """``CREATE STREAM``: ``this`` the name; ``columns`` ``(name, type text as written)``
    pairs; ``type_offsets`` where each type starts in the statement (for errors);
    ``options`` ``(key, value)`` pairs. Tuples, not lists and dicts: sqlglot hashes and
    compares a node by its arguments."""

    arg_types = {
        "this": True,
        "columns": True,
        "type_offsets": True,
        "options": False,
        "if_not_exists": False,
    }

    @property
    def columns(self) -> list[tuple[str, str]]:
        return list(self.args.get("columns") or ())

    @property
    def type_offsets(self) -> list[int]:
        return list(self.args.get("type_offsets") or ())

    @property
    def options(self) -> StreamOptions:
        # The parser gave each key the type StreamOptions names (_stream_option_value).
        return cast(StreamOptions, dict(self.args.get("options") or ()))

    @property
    def if_not_exists(self) -> bool:
        return bool(self.args.get("if_not_exists"))


class DropStream(exp.Expression):
    """``DROP STREAM [IF EXISTS] name``: ``this`` the name."""

    arg_types = {"this": True, "if_exists": False}

    @property
    def if_exists(self) -> bool:
        return bool(self.args.get("if_exists"))


class ShowStreams(exp.Expression):
    """``SHOW STREAMS``."""

    arg_types = {}


class ShowStreamReaders(exp.Expression):
    """``SHOW STREAM READERS [name]``: ``this`` the name, or None for every stream."""

    arg_types = {"this": False}

    @property
    def name(self) -> str | None:  # type: ignore[override]
        return self.args.get("this")


StreamStatement = CreateStream | DropStream | ShowStreams | ShowStreamReaders
