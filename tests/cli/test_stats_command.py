"""The shell's ``.stats`` and ``SHOW STATS`` through ``matchsql -c``."""

from __future__ import annotations

import io

import pytest

import matchsql
from matchsql.cli.dot_commands import COMMANDS
from matchsql.cli.shell import Shell
from matchsql.storage import Producer
from matchsql.storage.demo import synthetic_trades
from tests.streams.test_live import QUERY, TRADES


@pytest.fixture(autouse=True)
def runtime_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MATCHSQL_RUNTIME_DIR", str(tmp_path / "runtime"))


def test_stats_dot_command_after_a_continuous_query() -> None:
    con = matchsql.connect(demo=False)
    shell = Shell(con, out=io.StringIO(), err=io.StringIO())
    try:
        assert "stats" in COMMANDS
        assert shell.run_dot(".stats")
        assert "no continuous query" in shell.out.getvalue()
        assert shell.run_text(TRADES + ";")
        with Producer.open("trades") as producer:  # written ahead: the query reads to the end
            producer.write_batch(synthetic_trades(1000, 5, 7))
        assert shell.run_text(QUERY.format(source="trades") + ";")
        shell.out.truncate(0)
        shell.out.seek(0)
        assert shell.run_dot(".stats")
        out = shell.out.getvalue()
        assert "input mode: pull" in out
        for metric in ("avg_mem", "max_queue", "throughput", "records", "latency", "switches"):
            assert metric in out
        assert "1000" in out  # records
        assert not shell.run_dot(".stats extra")
    finally:
        con.close()


def test_show_stats_from_the_command_line(run_cli) -> None:
    done = run_cli("--no-demo", "-c", "SHOW STATS")
    assert done.returncode == 0, done.stderr
    assert "metric" in done.stdout and "value" in done.stdout
