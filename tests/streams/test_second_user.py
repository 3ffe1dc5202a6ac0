"""A second local user (uid 65534, run with ``setpriv``) against one user's streams,
continuous query and database: everything they try fails or is refused with a clear
error, and the owner's work goes on.

These tests need root (to switch user) and ``setpriv``; elsewhere they are skipped. The
owner's files live in a directory every user may enter and write to, as /tmp is
(mode 1777): only matchsql's own modes and checks keep the other user out.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pytest

import matchsql
from matchsql.errors import StreamError
from matchsql.storage import Producer
from matchsql.storage.catalog import Catalog
from tests.streams.conftest import WAIT_S

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv"),
    reason="needs root and setpriv to run as a second user",
)

OTHER = 65534
SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.float64())])


def as_other_user(code: str) -> dict:
    """Run ``code`` (which sets ``out``, a dict) as uid/gid 65534; ``out`` as JSON."""
    program = f"import json, os\nout = {{}}\n{code}\nprint(json.dumps(out))"
    done = subprocess.run(
        [
            "setpriv",
            f"--reuid={OTHER}",
            f"--regid={OTHER}",
            "--clear-groups",
            sys.executable,
            "-c",
            program,
        ],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


#: Attempts the other user makes: each path's outcome is "ok" or the error's name.
TRY = """
def attempt(what, action):
    try:
        action()
        out[what] = "ok"
    except OSError as exc:
        out[what] = type(exc).__name__
"""


@pytest.fixture
def shared():
    """A directory like /tmp: anyone may enter and make files (sticky, 1777)."""
    path = Path(tempfile.mkdtemp(prefix="matchsql-shared-"))
    os.chmod(path, 0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_registry_made_first_by_another_user_is_refused_and_another_one_works(
    shared, monkeypatch
):
    registry = shared / "registry"
    made = as_other_user(TRY + f"attempt('mkdir', lambda: os.mkdir({str(registry)!r}, 0o777))")
    assert made == {"mkdir": "ok"} and registry.stat().st_uid == OTHER
    monkeypatch.setenv("MATCHSQL_RUNTIME_DIR", str(registry))
    con = matchsql.connect(demo=False)
    with pytest.raises(
        StreamError,
        match=f"stream registry {registry} is owned by user id "
        f"{OTHER}, not by this user.*MATCHSQL_RUNTIME_DIR",
    ):
        con.sql("CREATE STREAM s (k BIGINT, v DOUBLE)")
    assert list(registry.iterdir()) == []  # nothing of ours went into theirs
    monkeypatch.setenv("MATCHSQL_RUNTIME_DIR", str(shared / "mine"))  # the hint, taken
    con.sql("CREATE STREAM s (k BIGINT, v DOUBLE)")
    assert [r[0] for r in con.sql("SHOW STREAMS").fetchall()] == ["s"]
    con.close()


def test_a_registry_link_placed_by_another_user_is_not_followed(shared, monkeypatch):
    registry, target = shared / "registry", shared / "target"
    placed = as_other_user(
        TRY + f"attempt('target', lambda: os.mkdir({str(target)!r}, 0o777))\n"
        f"attempt('link', lambda: os.symlink({str(target)!r}, "
        f"{str(registry)!r}))"
    )
    assert placed == {"target": "ok", "link": "ok"}
    monkeypatch.setenv("MATCHSQL_RUNTIME_DIR", str(registry))
    con = matchsql.connect(demo=False)
    with pytest.raises(StreamError, match="symbolic link, which matchsql does not follow"):
        con.sql("CREATE STREAM s (k BIGINT, v DOUBLE)")
    assert list(target.iterdir()) == []
    con.close()


def test_an_archive_directory_made_first_by_another_user_is_refused(shared, monkeypatch):
    monkeypatch.setenv("MATCHSQL_RUNTIME_DIR", str(shared / "mine"))
    archive = shared / "archive"
    as_other_user(TRY + f"attempt('mkdir', lambda: os.mkdir({str(archive)!r}, 0o755))")
    con = matchsql.connect(demo=False)
    with pytest.raises(StreamError, match=f"is owned by user id {OTHER}"):
        con.sql(f"CREATE STREAM s (k BIGINT, v DOUBLE) WITH (archive = '{archive}/')")
    con.sql(f"CREATE STREAM s (k BIGINT, v DOUBLE) WITH (archive = '{shared}/ours/')")
    con.close()


def test_another_user_reads_and_writes_nothing_of_a_running_continuous_query(shared, monkeypatch):
    monkeypatch.setenv("MATCHSQL_RUNTIME_DIR", str(shared / "registry"))
    os.umask(0o022)  # the usual umask, which lets everyone read new files
    database = shared / "db.duckdb"
    archive = shared / "archive"
    con = matchsql.connect(str(database))
    con.sql("CREATE TABLE sink (k BIGINT, s DOUBLE, e DOUBLE)")
    con.sql(
        f"CREATE STREAM ticks (k BIGINT, v DOUBLE) WITH (capacity = 64, on_full = 'spill', "
        f"archive = '{archive}/')"
    )
    con.sql(
        "CREATE CONTINUOUS QUERY up WITH (checkpoint_rows = 100) AS INSERT INTO sink "
        "SELECT * FROM ticks MATCH_RECOGNIZE(PARTITION BY k ORDER BY v MEASURES "
        "FIRST(A.v) AS s, LAST(B.v) AS e ONE ROW PER MATCH PATTERN (A B+) "
        "DEFINE B AS B.v > PREV(B.v))"
    )
    with Producer.open("ticks", database=str(database), name="p") as producer:
        for low in range(0, 2000, 200):
            values = [float(i) for i in range(low, low + 200)]
            producer.write_batch(
                pa.table({"k": [int(v) % 3 for v in values], "v": values}, schema=SCHEMA),
                batch_id=low,
            )
        definition = Catalog(str(database)).require("ticks")
        files = sorted(str(p) for p in archive.rglob("*") if p.is_file())
        spill = Path(definition.spill_dir)
        assert files, "the archive has parts to try"
        tried = as_other_user(
            TRY
            + "import posix_ipc\n"
            + "\n".join(
                [
                    f"attempt('read database', lambda: open({str(database)!r}, 'rb').read(1))",
                    f"attempt('read log', lambda: open({str(database) + '.wal'!r}, 'rb').read(1))",
                    f"attempt('list archive', lambda: os.listdir({str(archive)!r}))",
                    f"attempt('read archive part', lambda: open({files[0]!r}, 'rb').read(1))",
                    f"attempt('replace archive part', lambda: open({files[0]!r}, 'wb')"
                    ".write(b'x'))",
                    "attempt('add archive part', lambda: open("
                    f"{str(archive / 'part-9.parquet')!r}, 'wb').write(b'x'))",
                    f"attempt('list registry', lambda: os.listdir({str(shared / 'registry')!r}))",
                    f"attempt('list spill', lambda: os.listdir({str(spill)!r}))",
                    f"attempt('write registry entry', lambda: open("
                    f"{str(shared / 'registry')!r} + '/evil.json', 'w').write('{{}}'))",
                ]
            )
            + f"""
try:
    posix_ipc.SharedMemory({definition.segment!r})
    out['open segment'] = 'ok'
except posix_ipc.Error as exc:
    out['open segment'] = type(exc).__name__
"""
        )
    assert tried == {
        "read database": "PermissionError",
        "read log": "PermissionError",
        "list archive": "PermissionError",
        "read archive part": "PermissionError",
        "replace archive part": "PermissionError",
        "add archive part": "PermissionError",
        "list registry": "PermissionError",
        "list spill": "PermissionError",
        "write registry entry": "PermissionError",
        "open segment": "PermissionsError",
    }, tried
    # The owner's query went on: every tuple reached it, and its matches the sink.
    shown = con.sql("SHOW CONTINUOUS QUERIES")
    deadline = time.monotonic() + WAIT_S
    while (row := dict(zip(shown.columns, shown.fetchall()[0])))["state"] != "finished":
        assert row["state"] != "failed", row["error"]
        assert time.monotonic() < deadline, row
        time.sleep(0.05)
        shown = con.sql("SHOW CONTINUOUS QUERIES")
    assert con.sql("SELECT count(*) FROM sink").fetchall() == [(3,)]
    con.close()
