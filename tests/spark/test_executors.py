"""Executors whose Python cannot run matchsql: ExecutorSetupError at the call, on local[2].

(The same on a standalone cluster, and the cure by shipping matchsql as a zip, is in
``test_cluster``.) Each test points the session's Python workers at another interpreter
for one call, then back: the probe runs again for each interpreter, and a good one is
probed once.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from bench.queries import DEJAVU
from matchsql.integrations.spark import ExecutorSetupError, executors, match_recognize

from .helpers import frame, python_without_matchsql, trades

pytestmark = [pytest.mark.xdist_group("spark")]


@contextlib.contextmanager
def workers_run(spark, python: str):
    context = spark.sparkContext
    original = context.pythonExec
    context.pythonExec = python
    try:
        yield
    finally:
        context.pythonExec = original


def test_python_without_matchsql(spark, tmp_path: Path) -> None:
    python = str(python_without_matchsql(tmp_path))  # a script that runs bare-venv's python
    df = frame(spark, trades(200, 2))
    with workers_run(spark, python), pytest.raises(ExecutorSetupError) as caught:
        match_recognize(df, DEJAVU["Q4"], input_order="ts")
    message = str(caught.value)
    assert f"{tmp_path / 'bare-venv' / 'bin' / 'python'} (Python " in message
    assert (
        "lacks matchsql.integrations.spark.worker (ModuleNotFoundError: No module named 'matchsql')"
        in message
    )
    assert "--archives" in message and "--py-files" in message
    assert "Traceback" not in message and "at org.apache" not in message


def test_an_executor_that_joins_after_the_probe_says_what_it_lacks(
    spark, tmp_path: Path, monkeypatch
) -> None:
    """The probe passed (as it would have on the executors of the time); a task that
    lands on an interpreter without matchsql unpickles its function and fails with one
    line that names what is missing and how to ship matchsql."""
    python = str(python_without_matchsql(tmp_path))
    monkeypatch.setattr(executors, "_checked", set())
    monkeypatch.setattr(executors, "_probe", lambda session: [])
    df = frame(spark, trades(200, 2))
    with workers_run(spark, python), pytest.raises(Exception) as caught:
        match_recognize(df, DEJAVU["Q4"], input_order="ts").collect()
    message = str(caught.value)
    assert "RuntimeError: matchsql cannot run on this Spark executor: " in message
    assert f"{tmp_path / 'bare-venv' / 'bin' / 'python'} (Python " in message
    assert "lacks matchsql.integrations.spark." in message
    assert "(ModuleNotFoundError: No module named 'matchsql')" in message
    assert "--py-files matchsql.zip" in message


def test_python_that_does_not_exist(spark) -> None:
    df = frame(spark, trades(200, 2))
    with workers_run(spark, "/nonexistent/python3"), pytest.raises(ExecutorSetupError) as caught:
        match_recognize(df, DEJAVU["Q4"], input_order="ts")
    message = str(caught.value)
    assert 'the probe job failed (Cannot run program "/nonexistent/python3"' in message
    assert "\n\tat " not in message


def test_good_workers_are_probed_once(spark, monkeypatch) -> None:
    df = frame(spark, trades(200, 2))
    match_recognize(df, DEJAVU["Q4"], input_order="ts")  # probed here, or by an earlier test
    calls = []
    monkeypatch.setattr(executors, "_probe", lambda session: calls.append(session) or [])
    match_recognize(df, DEJAVU["Q4"], input_order="ts")
    assert calls == []


def test_cause_is_the_telling_line() -> None:
    spark_error = (
        "An error occurred while calling o123.collectToPython.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: ...\n"
        "\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(...)\n"
        "ModuleNotFoundError: No module named 'pyarrow'\n"
    )
    assert executors.cause(spark_error) == "No module named 'pyarrow'"
    assert executors.cause("\n  at x\nsomething broke\n") == "something broke"
