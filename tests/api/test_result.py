"""Result reads: again after the end, DuckDB's method names, and the size limit of keeping rows."""

import pyarrow as pa
import pytest

import matchsql
from matchsql.results import result as result_module

# The first 20 trades of each of the 50 symbols: many batches of 3 rows, in 50
# partitions (the whole 500,000-row table took minutes at 3 rows a batch).
PATTERN = (
    "SELECT * FROM (FROM trade QUALIFY row_number() OVER (PARTITION BY symbol "
    "ORDER BY ts) <= 20) MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
    "MEASURES A.price AS start_price, count(*) AS n "
    "PATTERN (A B+) DEFINE B AS price > PREV(price))"
)


@pytest.fixture
def con():
    c = matchsql.connect(batch_size=3)
    yield c
    c.close()


def test_fetchall_twice_gives_the_same_rows(con):
    res = con.sql("SELECT range AS i FROM range(10)")
    first = res.fetchall()
    assert first == [(i,) for i in range(10)]
    assert res.fetchall() == first


def test_df_then_arrow_then_fetchall_read_the_same_rows(con):
    res = con.sql(PATTERN)
    frame = res.df()
    assert len(frame) > 0
    table = res.arrow()
    assert table.num_rows == len(frame)
    assert table.column("n").to_pylist() == frame["n"].tolist()
    assert res.fetchall() == list(zip(*(c.to_pylist() for c in table.columns)))


def test_fetchall_after_fetchone_reads_the_rest_then_everything(con):
    res = con.sql("SELECT range AS i FROM range(5)")
    assert res.fetchone() == (0,)
    assert res.fetchall() == [(1,), (2,), (3,), (4,)]
    assert res.fetchone() is None
    assert res.fetchall() == [(i,) for i in range(5)]


def test_fetch_record_batch_and_its_aliases(con):
    res = con.sql("SELECT range AS i FROM range(10)")
    reader = res.fetch_record_batch(4)
    assert isinstance(reader, pa.RecordBatchReader)
    assert [b.num_rows for b in reader] == [3, 3, 3, 1]  # DuckDB's batches cut at 4
    again = res.to_arrow_reader()
    assert again.read_all().column("i").to_pylist() == list(range(10))
    assert res.fetch_arrow_table().num_rows == 10
    assert res.fetchdf()["i"].tolist() == list(range(10))


def test_rows_per_batch_must_be_positive(con):
    with pytest.raises(matchsql.Error, match="rows_per_batch"):
        con.sql("SELECT 1").fetch_record_batch(0)


def test_pl_without_polars_is_a_clear_error(con):
    try:
        import polars  # noqa: F401
    except ImportError:
        with pytest.raises(matchsql.Error, match="polars"):
            con.sql("SELECT 1 AS x").pl()
    else:
        assert con.sql("SELECT 1 AS x").pl()["x"].to_list() == [1]


def test_a_result_too_large_to_keep_says_so_on_a_second_read(con, monkeypatch):
    monkeypatch.setattr(result_module, "KEEP_BYTES", 64)
    res = con.sql("SELECT range AS i FROM range(100)")
    assert len(res.fetchall()) == 100
    with pytest.raises(matchsql.Error, match="already read.*run the statement again"):
        res.fetchall()
