"""Box tables drawn from streamed Arrow batches."""

from __future__ import annotations

import io

import duckdb
import pyarrow as pa
import pytest

import matchsql
from matchsql.cli.shell import Shell
from matchsql.results.render import collect, render_batches


def _render(sql: str, batch_rows: int = 7, **options) -> str:
    reader = duckdb.connect().sql(sql).to_arrow_reader(batch_rows)
    return render_batches(reader.schema, reader, **options)


def test_small_result_shows_every_row_and_a_footer() -> None:
    text = _render("SELECT 42 AS answer, 'x' AS s, NULL::INTEGER AS n")
    lines = text.splitlines()
    assert lines[0].startswith("┌") and lines[-2].startswith("└")
    assert "answer" in lines[1] and "integer" in lines[2] and "varchar" in lines[2]
    assert "│      42 │ x       │    NULL │" in text
    assert lines[-1].strip() == "1 row"


def test_empty_result() -> None:
    text = _render("SELECT range AS i FROM range(0)")
    assert text.splitlines()[-1].strip() == "0 rows"
    assert "bigint" in text


def test_long_result_shows_head_tail_and_true_count() -> None:
    text = _render("SELECT range AS i FROM range(1000001)", batch_rows=4096, max_rows=6)
    numbers = [line.strip("│ ") for line in text.splitlines() if line.startswith("│")]
    assert numbers[2:5] == ["0", "1", "2"]
    assert numbers[5:8] == ["·", "·", "·"]
    assert numbers[8:] == ["999998", "999999", "1000000"]
    assert text.splitlines()[-1].strip() == "1,000,001 rows (6 shown)"


def test_max_rows_zero_shows_all() -> None:
    text = _render("SELECT range AS i FROM range(100)", max_rows=0)
    assert text.splitlines()[-1].strip() == "100 rows"
    assert "·" not in text


def test_collect_keeps_only_what_it_shows() -> None:
    schema = pa.schema([("i", pa.int64())])
    batches = (
        pa.record_batch([pa.array(range(n, n + 10))], schema=schema) for n in range(0, 1000, 10)
    )
    data = collect(schema, batches, max_rows=5)
    assert data.total == 1000
    assert data.head.column("i").to_pylist() == [0, 1, 2]
    assert data.tail.column("i").to_pylist() == [998, 999]


def test_wide_result_elides_middle_columns() -> None:
    columns = ", ".join(f"{i} AS column_{i}" for i in range(30))
    text = _render(f"SELECT {columns}", max_width=80)
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "column_0" in text and "column_29" in text and "…" in text
    assert "30 columns (" in text.splitlines()[-1]


def test_values_read_as_in_duckdb() -> None:
    text = _render(
        "SELECT TIMESTAMP '2006-01-03 09:30:00.000001' AS ts, [1, 2] AS l, "
        "1.5::DECIMAL(5,2) AS d, 'a\nb' AS nl, repeat('x', 100) AS long"
    )
    assert "2006-01-03 09:30:00.000001" in text
    assert "[1, 2]" in text and "1.50" in text
    assert "a\\nb" in text
    assert "x…" in text


def test_results_just_over_max_rows_show_their_own_last_rows() -> None:
    # N+1 .. 2N rows: the last rows to show were collected while the head was filling.
    for total in (41, 50, 60, 61, 79, 80, 81):
        for batch_rows in (1, 7, 2048):
            text = _render(
                f"SELECT range AS i FROM range({total})", batch_rows=batch_rows, max_rows=40
            )
            numbers = [line.strip("│ ") for line in text.splitlines() if line.startswith("│")]
            assert numbers[2:22] == [str(i) for i in range(20)]
            assert numbers[22:25] == ["·", "·", "·"]
            assert numbers[25:] == [str(i) for i in range(total - 20, total)], (total, batch_rows)
            assert text.splitlines()[-1].strip() == f"{total:,} rows (40 shown)"


RELATION_QUERIES = [
    "SELECT 1.5::DECIMAL(4,2) AS d, NULL AS n, 'a' AS s, 2.5::DOUBLE AS f, 10::HUGEINT AS h, "
    "[1, 2] AS l, {'a': 1} AS st, TIMESTAMP '2020-01-01 10:00:00' AS ts, INTERVAL 3 DAY AS iv, "
    "'x\ny' AS nl, true AS b, 1::UBIGINT AS u, 7::UTINYINT AS ut",
    "SELECT * FROM range(50) t(i)",
    "SELECT * FROM range(11) t(i)",
    "SELECT * FROM range(10) t(i)",
    "SELECT * FROM range(0) t(i)",
    "PRAGMA version",
    "SELECT 1 AS a, 2 AS a",
    "SELECT repeat('x', 100) AS long, 1 AS b",
    "SELECT CAST('x' AS INTEGER)",
]


@pytest.mark.parametrize("sql", RELATION_QUERIES)
def test_plain_sql_drawn_by_duckdb_matches_the_arrow_drawing(sql: str) -> None:
    """``-c`` without a later .plot draws plain SQL from the DuckDB relation (no pyarrow):
    the same box, footer and errors as the Arrow route."""
    con = matchsql.connect(demo=False)
    outputs = []
    for keep_last in (True, False):
        out, err = io.StringIO(), io.StringIO()
        shell = Shell(con, out=out, err=err, keep_last=keep_last, max_rows=10)
        shell.max_width = 60
        shell.run_text(sql)
        outputs.append((out.getvalue(), err.getvalue()))
    assert outputs[0] == outputs[1]
    assert outputs[0][0] or outputs[0][1]
