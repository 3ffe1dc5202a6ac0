"""Result.plot and the shell's .plot: the series with each match banded."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from matplotlib.colors import to_rgb

import matchsql
from matchsql.cli.shell import Shell
from matchsql.results.plot import match_spans

# x:  0   1   2   3   4    5   6   7   8
# y:  5  10   9   8  9.5  11  11  10  12
# PATTERN (A B+ C+), B falling, C rising, SKIP PAST LAST ROW:
# - from x=0: B needs y(1) < y(0), 10 < 5 fails: x=0 is unmatched (m NULL);
# - from x=1: B at 2, 3 (9 < 10, 8 < 9), not 4; C at 4, 5 (9.5 > 8, 11 > 9.5), not 6
#   (11 > 11 fails): match 1 is x 1..5;
# - from x=6: B at 7 (10 < 11), not 8; C at 8 (12 > 10): match 2 is x 6..8.
SERIES = (
    "CREATE TABLE s AS SELECT * FROM (VALUES (0, 5.0), (1, 10.0), (2, 9.0), (3, 8.0), "
    "(4, 9.5), (5, 11.0), (6, 11.0), (7, 10.0), (8, 12.0)) t(x, y)"
)
QUERY = (
    "SELECT * FROM s MATCH_RECOGNIZE (ORDER BY x MEASURES MATCH_NUMBER() AS m "
    "ALL ROWS PER MATCH WITH UNMATCHED ROWS AFTER MATCH SKIP PAST LAST ROW "
    "PATTERN (A B+ C+) DEFINE B AS y < PREV(y), C AS y > PREV(y)) ORDER BY x"
)
EXPECTED = {"match 1": (1, 5), "match 2": (6, 8)}


@pytest.fixture
def con():
    con = matchsql.connect(demo=False)
    con.sql(SERIES)
    yield con
    con.close()


def bands(figure) -> dict[str, tuple[float, float]]:
    """gid -> (first x, last x) of the match bands drawn on ``figure``."""
    axes = figure.axes[0]
    return {
        p.get_gid(): (p.get_x(), p.get_x() + p.get_width()) for p in axes.patches if p.get_gid()
    }


def test_result_plot_bands_each_match(con, tmp_path: Path) -> None:
    path = tmp_path / "matches.png"
    figure = con.sql(QUERY).plot(x="x", y="y", path=str(path))
    assert bands(figure) == EXPECTED
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000
    axes = figure.axes[0]
    line = axes.get_lines()[0]
    assert list(line.get_xdata()) == list(range(9))  # the whole series, unmatched row too
    marked = axes.collections[0].get_offsets()
    assert sorted(float(x) for x, _ in marked) == [1, 2, 3, 4, 5, 6, 7, 8]  # not x=0
    assert "2 matches" in axes.get_title()


def test_match_column_is_found_by_name_or_given(con) -> None:
    renamed = QUERY.replace("AS m ", "AS which ")
    with pytest.raises(matchsql.Error, match="MATCH_NUMBER"):
        con.sql(renamed).plot(x="x", y="y")
    assert bands(con.sql(renamed).plot(x="x", y="y", match="which")) == EXPECTED
    with pytest.raises(matchsql.Error, match="no column 'nope'"):
        con.sql(QUERY).plot(x="x", y="nope")
    with pytest.raises(matchsql.Error, match="no rows"):
        con.sql(QUERY + " LIMIT 0").plot(x="x", y="y")


def test_by_draws_one_line_per_partition_with_its_matches(con) -> None:
    con.sql(
        "CREATE TABLE two AS SELECT 'a' AS p, * FROM s UNION ALL SELECT 'b', x, -y FROM s"
    )  # b falls where a rises: B and C swap
    query = QUERY.replace("FROM s MATCH_RECOGNIZE (", "FROM two MATCH_RECOGNIZE (PARTITION BY p ")
    table = con.sql(query).arrow()
    spans = {
        (s.partition, s.match): (s.start, s.end, s.rows) for s in match_spans(table, "x", "m", "p")
    }
    assert spans[("a", 1)] == (1, 5, 5) and spans[("a", 2)] == (6, 8, 3)
    # b: y = -5, -10, -9, -8, -9.5, -11, -11, -10, -12. From x=0: B at 1 (-10 < -5), not 2;
    # C at 2, 3 (-9 > -10, -8 > -9), not 4: match 1 is x 0..3. From x=4: B at 5 (-11 < -9.5),
    # not 6 (-11 < -11 fails); C needs 6 > 5: fails; from x=5: B at 6? no; ... from x=6:
    # B at 7? -10 < -11 no. From x=7: B at 8 (-12 < -10), then C needs a 9th row: none.
    assert spans[("b", 1)] == (0, 3, 4)
    assert len([s for s in spans if s[0] == "b"]) == 1
    figure = con.sql(query).plot(x="x", y="y", by="p")
    drawn = bands(figure)
    assert drawn == {"match 1 of a": (1, 5), "match 2 of a": (6, 8), "match 1 of b": (0, 3)}
    colours = {line.get_label(): line.get_color() for line in figure.axes[0].get_lines()}
    band_b = next(p for p in figure.axes[0].patches if p.get_gid() == "match 1 of b")
    assert band_b.get_facecolor()[:3] == pytest.approx(to_rgb(colours["b"]))


def test_shell_plot_writes_a_png_of_the_last_result(con, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MATCHSQL_PLOT_DIR", str(tmp_path))
    out, err = io.StringIO(), io.StringIO()
    shell = Shell(con, out=out, err=err)
    assert not shell.run_dot(".plot x y")
    assert "no result to plot" in err.getvalue()
    assert shell.run_text(QUERY + ";")
    assert shell.run_dot(".plot x y")
    path = Path(out.getvalue().strip().splitlines()[-1])
    assert path == tmp_path / "matchsql_plot_1.png" and path.stat().st_size > 5000
    assert shell.run_dot(f".plot x y file={tmp_path / 'named.png'} title=Dips")
    assert (tmp_path / "named.png").exists()
    assert shell.run_dot(".plot x y")  # the next free name
    assert (tmp_path / "matchsql_plot_2.png").exists()
    assert not shell.run_dot(".plot x")
    assert "Usage: .plot" in err.getvalue()
    assert not shell.run_dot(".plot x nope")
    assert "no column 'nope'" in err.getvalue()


TWO = "CREATE TABLE two AS SELECT 'a' AS p, * FROM s UNION ALL SELECT 'b', x, -y FROM s"
BY_P = QUERY.replace("FROM s MATCH_RECOGNIZE (", "FROM two MATCH_RECOGNIZE (PARTITION BY p ")


def test_a_partitioned_result_draws_a_line_per_partition_by_default(con) -> None:
    """Match numbers count per partition: match 1 of a and match 1 of b are two matches,
    each banded on its own partition's line."""
    con.sql(TWO)
    result = con.sql(BY_P)
    assert result.partition_by == ["p"]
    figure = result.plot(x="x", y="y")
    assert bands(figure) == {"match 1 of a": (1, 5), "match 2 of a": (6, 8), "match 1 of b": (0, 3)}
    assert sorted(line.get_label() for line in figure.axes[0].get_lines()) == ["a", "b"]
    assert "3 matches" in figure.axes[0].get_title()
    # Not a partition column in the result: one line, as before.
    assert con.sql(BY_P.replace("SELECT *", "SELECT * EXCLUDE (p)")).partition_by == []


def test_several_partition_columns_make_one_line_each(con) -> None:
    con.sql(TWO)
    con.sql(
        "CREATE TABLE four AS SELECT *, 1 AS q FROM two UNION ALL SELECT p, x, y * 2, 2 FROM two"
    )
    query = BY_P.replace("FROM two", "FROM four").replace("PARTITION BY p", "PARTITION BY p, q")
    figure = con.sql(query).plot(x="x", y="y")
    labels = sorted(line.get_label() for line in figure.axes[0].get_lines())
    assert labels == ["a, 1", "a, 2", "b, 1", "b, 2"]
    assert "match 1 of b, 2" in bands(figure)


def test_a_match_column_that_holds_no_match_numbers_is_refused(con) -> None:
    text = QUERY.replace("SELECT *", "SELECT *, 'm' || m AS label")
    with pytest.raises(matchsql.Error, match="'label' holds string values, not match numbers"):
        con.sql(text).plot(x="x", y="y", match="label")


def test_shell_plot_of_a_partitioned_result_and_its_folder(
    con, tmp_path: Path, monkeypatch
) -> None:
    """Without MATCHSQL_PLOT_DIR the picture goes to a private temporary folder, never the
    current directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MATCHSQL_PLOT_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    con.sql(TWO)
    out, err = io.StringIO(), io.StringIO()
    shell = Shell(con, out=out, err=err)
    assert shell.run_text(BY_P + ";")
    assert shell.run_dot(".plot x y"), err.getvalue()
    path = Path(out.getvalue().strip().splitlines()[-1])
    assert path.parent.parent == tmp_path / "tmp" and path.exists()
    assert (path.parent.stat().st_mode & 0o777) == 0o700
    assert not list(tmp_path.glob("*.png"))
    assert not shell.run_dot(".plot x y match=p")
    assert "not match numbers" in err.getvalue()
