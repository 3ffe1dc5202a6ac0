"""The functions matchsql hands Spark travel as plain data, without Spark.

An executor that joins after the probe (:mod:`matchsql.integrations.spark.executors`)
and lacks matchsql must still unpickle every task function, and then say what it lacks
and how to ship matchsql, instead of failing inside Spark's unpickling. Here each
function is pickled as Spark pickles it (``pyspark.cloudpickle``) and loaded by an
interpreter that has neither matchsql nor pyarrow: the standard library and a copy of
pyspark's cloudpickle only.
"""

from __future__ import annotations

import json
import pickle
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from matchsql.config import Config
from matchsql.integrations.spark import executors, ranges, spark_stream, worker
from matchsql.integrations.spark.spark_plan import build_plan, plan_data
from matchsql.integrations.spark.worker import run_task

from .helpers import canonical, table_rows, trades

cloudpickle = pytest.importorskip("pyspark.cloudpickle")

QUERY = (
    "SELECT * FROM trade MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
    "MEASURES MATCH_NUMBER() AS m, FIRST(A.price) AS a ONE ROW PER MATCH "
    "PATTERN (A B+ C) DEFINE B AS price < PREV(price), C AS price > A.price)"
)

# What a bare executor runs: each payload unpickled as Spark's worker does, then called
# with as many arguments as Spark passes; what it raised, and whether loading imported
# matchsql or pyarrow.
LOADER = """
import importlib.util, json, pickle, sys
report = {
    "importable": [n for n in ("matchsql", "pyarrow") if importlib.util.find_spec(n)],
    "raised": {},
}
for path, arity in json.loads(sys.argv[1]).items():
    with open(path, "rb") as f:
        function = pickle.loads(f.read())
    report.setdefault("loaded", []).append(path)
    arguments = (iter(()),) if arity == 1 else ((0,), iter(()), None)
    try:
        function(*arguments)
    except RuntimeError as exc:
        report["raised"][path] = str(exc)
report["imported"] = sorted(n for n in ("matchsql", "pyarrow") if n in sys.modules)
print(json.dumps(report))
"""


def shipped_functions() -> dict[str, tuple[Callable[..., Any], int, str]]:
    """Every function a query hands Spark, with its arity and the module it runs."""
    data = trades(50, 2)
    plan = build_plan(QUERY, "trade", data.schema)
    out = plan.output_schema()
    spark_side = "matchsql.integrations.spark."
    return {
        "task": (worker.task_function(plan, None, out), 1, spark_side + "worker"),
        "group": (worker.group_function(plan, Config(), out), 1, spark_side + "worker"),
        "spread": (
            ranges.spread_function(plan, Config(), data.schema, [0, 1], 16),
            1,
            spark_side + "ranges",
        ),
        "ranges": (
            ranges.range_function(plan, Config(), 16, [0, 1], out),
            1,
            spark_side + "ranges",
        ),
        "renumber": (ranges.renumber_function(["m"], out), 1, spark_side + "ranges"),
        "state": (
            spark_stream.state_function(plan, None, out, None, 1000),
            3,
            spark_side + "spark_stream",
        ),
        "bucket": (
            spark_stream.bucket_function(plan, None, out, None),
            3,
            spark_side + "spark_stream",
        ),
    }


def bare_python(root: Path) -> list[str]:
    """A command running this interpreter on the standard library alone (``-I -S``: no
    site-packages, no PYTHONPATH, no working directory) plus a copy of pyspark's
    cloudpickle, which Spark's own workers always have, without the rest of pyspark."""
    import pyspark.cloudpickle as source

    package = root / "pyspark"
    shutil.copytree(Path(source.__file__).parent, package / "cloudpickle")
    (package / "__init__.py").write_text("")
    setup = f"import sys; sys.path.append({str(root)!r}); "
    return [sys.executable, "-I", "-S", "-c", setup + LOADER]


def test_shipped_functions_load_without_matchsql_and_say_what_is_missing(
    tmp_path: Path,
) -> None:
    functions = shipped_functions()
    arities = {}
    for name, (function, arity, _) in functions.items():
        path = tmp_path / f"{name}.pickle"
        path.write_bytes(cloudpickle.dumps(function))
        arities[str(path)] = arity
    command = bare_python(tmp_path / "site")
    done = subprocess.run(
        [*command, json.dumps(arities)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["importable"] == []  # the interpreter really lacks both
    assert len(report["loaded"]) == len(functions)
    assert report["imported"] == []  # unpickling needed no matchsql class
    for name, (_, _, module) in functions.items():
        message = report["raised"].get(str(tmp_path / f"{name}.pickle"), "")
        assert message.startswith(
            f"matchsql cannot run on this Spark executor: {sys.executable} (Python "
        ), (name, message)
        assert "lacks pyarrow (ModuleNotFoundError: No module named 'pyarrow')" in message
        assert f"{module} (ModuleNotFoundError: No module named 'matchsql')" in message
        assert message.endswith(executors.HOW_TO_SHIP)


def test_shipped_functions_carry_plain_data_only() -> None:
    """Their closures hold str, int, bytes, ... only, and their globals no matchsql name."""
    for name, (function, _, _) in shipped_functions().items():
        cells = [cell.cell_contents for cell in function.__closure__ or ()]
        assert all(executors.plain(value) for value in cells), name
        used = set(function.__code__.co_names) & set(function.__globals__)
        assert all(
            not getattr(function.__globals__[n], "__name__", "").startswith("matchsql")
            for n in used
        ), (name, used)
        assert function.__annotations__ == {}  # Spark reads applyInArrow's kind from them


def test_data_that_is_not_plain_is_refused() -> None:
    with pytest.raises(TypeError, match="plain data"):
        executors.shipped_function(worker.__name__, "shipped_task", (pa.schema([]),))
    assert not executors.plain(("a", [1, 2.0, None, b"x"], {"k": pa.int64()}))
    assert executors.plain(("a", [1, 2.0, None, b"x", True], {"k": (1,)}))


def test_a_pickled_task_function_gives_the_rows_of_the_plan() -> None:
    """Loaded where matchsql is present, the task function builds the plan again from
    its data and gives run_task's rows on the driver's plan."""
    data = trades(400, 3, seed=4)
    plan = build_plan(QUERY, "trade", data.schema)
    config = Config(batch_size=64)
    function = pickle.loads(
        cloudpickle.dumps(worker.task_function(plan, config, plan.output_schema()))
    )
    got = list(function(iter(data.to_batches(max_chunksize=100))))
    expected = list(run_task(plan, config, iter(data.to_batches()), plan.output_schema()))
    assert expected and canonical(table_rows(pa.Table.from_batches(got))) == canonical(
        table_rows(pa.Table.from_batches(expected))
    )
    rebuilt, settings = worker.shipped_plan(plan_data(plan, config))
    assert settings == config and rebuilt is worker.shipped_plan(plan_data(plan, config))[0]
    assert (rebuilt.sort_keys, rebuilt.arrow_sort, rebuilt.output_schema()) == (
        plan.sort_keys,
        plan.arrow_sort,
        plan.output_schema(),
    )
