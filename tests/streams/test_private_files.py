"""Files matchsql creates are its user's only; the stream registry, archive paths and
stream names are checked, so that another local user can neither read nor redirect
them."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

import matchsql
from matchsql.errors import CatalogError, ParseError, StreamError
from matchsql.storage import Producer
from matchsql.storage.catalog import runtime_dir
from matchsql.storage.stream_lifecycle import create_stream
from tests.streams.conftest import WAIT_S

COLUMNS = [("k", "BIGINT"), ("v", "DOUBLE")]
SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.float64())])


def mode(path: Path | str) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def loose_umask():
    """The usual umask that lets everyone read new files: matchsql must not rely on it."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_database_log_checkpoint_archive_spill_and_registry_are_owner_only(
    tmp_path, runtime_dir, loose_umask
):
    database = str(tmp_path / "db.duckdb")
    con = matchsql.connect(database)
    assert mode(database) == 0o600
    con.sql("CREATE TABLE sink (k BIGINT, s BIGINT, e BIGINT)")
    con.sql(
        f"CREATE STREAM ticks (k BIGINT, v DOUBLE) WITH (capacity = 64, "
        f"on_full = 'spill', archive = '{tmp_path}/archive/')"
    )
    assert os.path.exists(database + ".wal")
    assert mode(database + ".wal") == 0o600
    con.sql(
        "CREATE CONTINUOUS QUERY up WITH (checkpoint_rows = 100) AS INSERT INTO sink "
        "SELECT * FROM ticks MATCH_RECOGNIZE(PARTITION BY k ORDER BY v MEASURES "
        "FIRST(A.v)::BIGINT AS s, LAST(B.v)::BIGINT AS e ONE ROW PER MATCH "
        "PATTERN (A B+) DEFINE B AS B.v > PREV(B.v))"
    )
    with Producer.open("ticks", database=database, name="p") as producer:
        for low in range(0, 2000, 100):
            producer.write_batch(
                pa.table(
                    {
                        "k": [i % 3 for i in range(low, low + 100)],
                        "v": [float(i) for i in range(low, low + 100)],
                    },
                    schema=SCHEMA,
                ),
                batch_id=low,
            )
        deadline = time.monotonic() + WAIT_S
        while con.sql("SELECT checkpoints FROM __matchsql_continuous_queries").fetchall()[0][0] < 3:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        if os.path.exists(database + ".wal"):
            assert mode(database + ".wal") == 0o600
    con.sql("STOP CONTINUOUS QUERY up")
    assert mode(runtime_dir) == 0o700
    made = [p for p in runtime_dir.rglob("*")] + [p for p in (tmp_path / "archive").rglob("*")]
    assert any(p.suffix == ".parquet" for p in made)
    assert any(p.suffix == ".json" for p in made)
    for path in [tmp_path / "archive", *made]:
        assert mode(path) == (0o700 if path.is_dir() else 0o600), path
    con.close()


def test_an_existing_database_keeps_its_mode(tmp_path, runtime_dir):
    database = tmp_path / "shared.duckdb"
    duckdb.connect(str(database)).close()
    os.chmod(database, 0o640)
    matchsql.connect(str(database)).close()
    assert mode(database) == 0o640


def test_the_registry_is_created_owner_only_under_xdg_runtime_dir(
    tmp_path, monkeypatch, loose_umask
):
    monkeypatch.delenv("MATCHSQL_RUNTIME_DIR")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert runtime_dir() == tmp_path / "matchsql"
    assert mode(tmp_path / "matchsql") == 0o700
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert runtime_dir() == Path("/tmp") / f"matchsql-{os.getuid()}"
    assert mode(runtime_dir()) == 0o700


def test_a_registry_that_is_a_link_or_writable_by_others_is_refused(tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    registry = tmp_path / "registry"
    registry.symlink_to(elsewhere)
    monkeypatch.setenv("MATCHSQL_RUNTIME_DIR", str(registry))
    with pytest.raises(StreamError, match="is a symbolic link, which matchsql does not follow"):
        runtime_dir()
    con = matchsql.connect(demo=False)
    with pytest.raises(StreamError, match="stream registry .* symbolic link"):
        con.sql("CREATE STREAM s (a BIGINT)")
    assert list(elsewhere.iterdir()) == []
    registry.unlink()
    registry.mkdir()
    os.chmod(registry, 0o777)
    with pytest.raises(
        StreamError,
        match=r"writable by other users \(mode 777\).*"
        "MATCHSQL_RUNTIME_DIR",
    ):
        con.sql("CREATE STREAM s (a BIGINT)")
    os.chmod(registry, 0o755)  # readable by others, not writable: made owner-only
    con.sql("CREATE STREAM s (a BIGINT)")
    assert mode(registry) == 0o700
    con.sql("DROP STREAM s")
    con.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a directory of another user")
def test_a_registry_of_another_user_is_refused(tmp_path, monkeypatch):
    registry = tmp_path / "registry"
    registry.mkdir(mode=0o700)
    os.chown(registry, 65534, 65534)
    monkeypatch.setenv("MATCHSQL_RUNTIME_DIR", str(registry))
    with pytest.raises(StreamError, match="is owned by user id 65534, not by this user"):
        runtime_dir()


@pytest.mark.parametrize("name", ["../../x", "a/b", "..", "", "a.json", "x" * 64, "a\n"])
def test_the_python_api_refuses_the_stream_names_sql_refuses(tmp_path, runtime_dir, name):
    con = matchsql.connect(demo=False)
    with pytest.raises(CatalogError, match="is not a stream name: a stream name is a letter"):
        create_stream(duckdb.connect(), None, name, COLUMNS, SCHEMA)
    with pytest.raises(CatalogError, match="is not a stream name"):
        Producer.open(name)
    if name and name.isprintable():
        with pytest.raises(ParseError, match="a stream name is a letter"):
            con.sql(f'CREATE STREAM "{name}" (k BIGINT, v DOUBLE)')
    assert not (tmp_path / "x.json").exists() and not (tmp_path / "x").exists()
    con.close()


@pytest.mark.parametrize("archive", ["/etc/", "/usr/lib/x/", "/"])
def test_a_system_directory_is_no_archive(archive):
    con = matchsql.connect(demo=False)
    with pytest.raises(StreamError, match="is in a system directory"):
        con.sql(f"CREATE STREAM s (k BIGINT) WITH (archive = '{archive}')")
    con.close()


def test_an_archive_others_can_write_to_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    con = matchsql.connect(demo=False)
    with pytest.raises(
        StreamError,
        match=r"archive of stream 's' .* is writable by other "
        r"users \(mode 777\)",
    ):
        con.sql(f"CREATE STREAM s (k BIGINT) WITH (archive = '{shared}/')")
    link = tmp_path / "link"
    link.symlink_to(shared)
    with pytest.raises(StreamError, match="writable by other users"):
        con.sql(f"CREATE STREAM s (k BIGINT) WITH (archive = '{link}/')")
    os.chmod(shared, 0o700)
    con.sql(f"CREATE STREAM s (k BIGINT) WITH (archive = '{link}/')")  # a link of the user's
    con.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a directory of another user")
def test_an_archive_of_another_user_is_refused(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, 65534, 65534)
    con = matchsql.connect(demo=False)
    with pytest.raises(StreamError, match="is owned by user id 65534"):
        con.sql(f"CREATE STREAM s (k BIGINT) WITH (archive = '{theirs}/')")
    con.close()


def test_a_plot_and_the_shell_history_are_owner_only(tmp_path, monkeypatch, loose_umask):
    pytest.importorskip("matplotlib")
    from matchsql.cli.repl import HISTORY_ENV, _history
    from matchsql.results.plot import save_plot

    table = pa.table({"t": [1, 2, 3], "v": [1.0, 3.0, 2.0], "m": [1, 1, None]})
    target = save_plot(table, tmp_path / "plot.png", "t", "v", match="m")
    assert mode(target) == 0o600
    monkeypatch.setenv(HISTORY_ENV, str(tmp_path / "history"))
    _history(None)  # type: ignore[arg-type] - the shell is used only for a warning
    assert mode(tmp_path / "history") == 0o600


def test_each_new_stream_gets_a_segment_name_nobody_can_guess(runtime_dir):
    from matchsql.storage.catalog import Catalog

    names = {Catalog(None).segment_name("s") for _ in range(3)}
    assert len(names) == 3


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv"),
    reason="needs root and setpriv to run as a second user",
)
def test_a_second_user_cannot_read_the_database_or_its_log(loose_umask):
    shared = Path(tempfile.mkdtemp(prefix="matchsql-shared-"))
    try:
        os.chmod(shared, 0o755)  # the directory lets everyone in: the files must not
        database = str(shared / "db.duckdb")
        con = matchsql.connect(database)
        con.sql("CREATE TABLE secret AS SELECT 42 AS answer")
        for path in (database, database + ".wal"):
            reader = subprocess.run(
                [
                    "setpriv",
                    "--reuid=65534",
                    "--regid=65534",
                    "--clear-groups",
                    sys.executable,
                    "-c",
                    f"open({path!r}, 'rb').read(1)",
                ],
                capture_output=True,
                text=True,
                timeout=WAIT_S,
            )
            assert reader.returncode != 0 and "PermissionError" in reader.stderr, path
        con.close()
    finally:
        shutil.rmtree(shared)
