"""Pictures of MATCH_RECOGNIZE results: the series, with each match highlighted.

People find patterns in a price chart faster than in a table, so a result
that carries its rows and their match numbers (``ALL ROWS PER MATCH``,
best ``WITH UNMATCHED ROWS`` so that the rows between matches are drawn
too, and a ``MATCH_NUMBER() AS m`` measure) is drawn as the ``y`` column
over the ``x`` column, with a shaded band over the x-extent of each match
and the matched rows marked. With ``by`` (the PARTITION BY columns: a
result knows them and passes them by default) each partition gets its own
line and its matches, numbered per partition, are banded on it.

Used by ``Result.plot()`` (a figure, shown inline in notebooks) and the
shell's ``.plot`` (a PNG file). matplotlib is imported on the first plot,
not with matchsql: the lazy import is the point (it takes longer to load
than the rest of matchsql), not a way around an import cycle.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

import pyarrow as pa

from matchsql.errors import Error
from matchsql.storage.permissions import owner_only_file

#: Column names taken for the match number when ``match`` is not given.
MATCH_COLUMNS = ("match_number", "match_num", "match_no", "match", "mn", "m")
#: Partitions drawn at most (each one a line, with its matches): the first ones.
MAX_LINES = 12


@dataclass(frozen=True)
class Span:
    """One match: its number, its partition (with ``by``), its first and last x, its rows."""

    match: Any
    partition: Any
    start: Any
    end: Any
    rows: int


def match_column(schema: pa.Schema, match: str | None) -> str:
    """The column holding the match number: ``match``, or one of :data:`MATCH_COLUMNS`."""
    names = {name.lower(): name for name in schema.names}
    if match is not None:
        if match.lower() not in names:
            raise Error(
                f"plot: no column {match!r} in the result (columns: {', '.join(schema.names)})"
            )
        return names[match.lower()]
    for candidate in MATCH_COLUMNS:
        if candidate in names:
            return names[candidate]
    raise Error(
        "plot: name the column that holds MATCH_NUMBER() (match=...), "
        "e.g. MEASURES MATCH_NUMBER() AS m ... ALL ROWS PER MATCH"
    )


@overload
def _column(table: pa.Table, name: str, role: str) -> str: ...
@overload
def _column(table: pa.Table, name: None, role: str) -> None: ...
def _column(table: pa.Table, name: str | None, role: str) -> str | None:
    if name is None:
        return None
    for column in table.schema.names:
        if column.lower() == name.lower():
            return column
    raise Error(
        f"plot: no column {name!r} for {role} in the result (columns: "
        f"{', '.join(table.schema.names)})"
    )


def match_spans(
    table: pa.Table, x: str, match: str, by: str | list[str] | None = None
) -> list[Span]:
    """Each match's first and last ``x`` (per ``by`` partition: match numbers count per
    partition), in order of appearance. With several ``by`` columns a partition is the
    tuple of their values.

    Rows whose match number is NULL (unmatched rows) belong to no span.
    """
    xs = table.column(x).to_pylist()
    numbers = table.column(match).to_pylist()
    parts = _partitions(table, _names(by))
    spans: dict[tuple[Any, Any], list[Any]] = {}
    for value, number, part in zip(xs, numbers, parts):
        if number is None or value is None:
            continue
        seen = spans.setdefault((part, number), [value, value, 0])
        seen[0] = min(seen[0], value)
        seen[1] = max(seen[1], value)
        seen[2] += 1
    return [
        Span(number, part, start, end, rows) for (part, number), (start, end, rows) in spans.items()
    ]


def _names(by: str | list[str] | None) -> list[str]:
    if by is None:
        return []
    return [by] if isinstance(by, str) else list(by)


def _partitions(table: pa.Table, by: list[str]) -> list[Any]:
    """Each row's partition: its ``by`` value, a tuple of them for several, None for none."""
    if not by:
        return [None] * table.num_rows
    columns = [table.column(name).to_pylist() for name in by]
    return columns[0] if len(columns) == 1 else list(zip(*columns))


def _label(part: Any) -> str:
    return ", ".join(map(str, part)) if isinstance(part, tuple) else str(part)


def check_match_numbers(table: pa.Table, match: str) -> None:
    """Refuse a ``match`` column that cannot hold match numbers (MATCH_NUMBER() is a
    BIGINT): a text column would band every distinct value as a match."""
    kind = table.schema.field(match).type
    if not pa.types.is_integer(kind):
        raise Error(
            f"plot: column {match!r} holds {kind} values, not match numbers: name "
            "the column of MATCH_NUMBER() (match=...)"
        )


def plot_matches(
    table: pa.Table,
    x: str,
    y: str,
    *,
    match: str | None = None,
    by: str | list[str] | None = None,
    title: str | None = None,
    backend: str | None = None,
) -> Any:
    """A matplotlib Figure of ``y`` over ``x`` with every match banded (see the module).

    ``by``: a column or several; each partition gets its own line, and its own matches
    (match numbers count per partition). At most :data:`MAX_LINES` partitions are drawn,
    the first ones; the title says so. ``backend`` is forced when given ("Agg" for files
    without a display).
    """
    x = _column(table, x, "x")
    y = _column(table, y, "y")
    names = [_column(table, name, "by") for name in _names(by)]
    match = match_column(table.schema, match)
    check_match_numbers(table, match)
    if not table.num_rows:
        raise Error("plot: the result has no rows")
    matplotlib = importlib.import_module("matplotlib")
    if backend:
        matplotlib.use(backend, force=True)
    pyplot = importlib.import_module("matplotlib.pyplot")

    keys = _partitions(table, names)
    partitions = list(dict.fromkeys(keys))
    drawn = partitions[:MAX_LINES]
    figure, axes = pyplot.subplots(figsize=(10, 4.8))
    spans = match_spans(table, x, match, names)
    for part in drawn:
        rows = table if not names else table.filter(pa.array([key == part for key in keys]))
        xs, ys = (
            rows.column(x).to_numpy(zero_copy_only=False),
            rows.column(y).to_numpy(zero_copy_only=False),
        )
        (line,) = axes.plot(xs, ys, linewidth=1.0, label=None if not names else _label(part))
        matched = rows.column(match).is_valid().to_numpy(zero_copy_only=False)
        axes.scatter(xs[matched], ys[matched], s=9, color=line.get_color(), zorder=3)
        for number, span in enumerate(s for s in spans if s.partition == part):
            # In the colour of its line (so that with ``by`` the band says whose match it
            # is); neighbouring matches alternate in strength so that they stay apart.
            band = axes.axvspan(
                span.start,
                span.end,
                alpha=0.16 if number % 2 else 0.3,
                linewidth=0,
                color=line.get_color(),
            )
            band.set_gid(f"match {span.match}" + ("" if not names else f" of {_label(part)}"))
    axes.set_xlabel(x)
    axes.set_ylabel(y)
    count = sum(1 for span in spans if span.partition in drawn)
    shown = (
        ""
        if len(drawn) == len(partitions)
        else f", the first {len(drawn)} of {len(partitions)} partitions"
    )
    axes.set_title(
        title
        or f"{y} over {x}: {count} match{'es' if count != 1 else ''} "
        f"(bands; marked rows are matched{shown})"
    )
    axes.grid(True, alpha=0.3)
    if names:
        axes.legend(title=", ".join(names), fontsize="small")
    if pa.types.is_temporal(table.schema.field(x).type):
        figure.autofmt_xdate()
    figure.tight_layout()
    return figure


def save_plot(table: pa.Table, path: str | Path, x: str, y: str, **options: Any) -> Path:
    """Draw :func:`plot_matches` into the PNG ``path`` (no display needed); its path."""
    figure = plot_matches(table, x, y, backend="Agg", **options)
    pyplot = importlib.import_module("matplotlib.pyplot")
    target = Path(path).expanduser().resolve()
    new = not target.exists()
    try:
        figure.savefig(target, dpi=110)
        if new:
            owner_only_file(str(target))  # a plot of the user's data is theirs only
    except OSError as exc:
        raise Error(f"plot: cannot write {target}: {exc.strerror}") from None
    finally:
        pyplot.close(figure)
    return target
