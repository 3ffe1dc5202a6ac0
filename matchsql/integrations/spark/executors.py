"""The executors' Python: can Spark's Python workers import what the matcher needs?

The matcher runs in the Python workers that Spark starts on every executor, with the
interpreter that ``PYSPARK_PYTHON`` (``spark.pyspark.python``) names *there*. Where that
interpreter lacks matchsql (or pyarrow, or another dependency), the first task fails,
and the user reads why inside a long Python-in-Java stack trace, only when the result
is first used, long after ``match_recognize`` returned. So before the first query of a
Spark application (per session, per worker interpreter), :func:`check_executors` runs
one small job: a plain Python UDF, which needs neither matchsql nor pyarrow and works
over Spark Connect, imports on the executors what the tasks import. A failure is raised
on the driver, at the call, as an :class:`ExecutorSetupError` that says what is missing
on which interpreter, and how to ship matchsql to the executors.

The probe is a closure over a tuple of module names, so cloudpickle sends it by value:
unpickling it on an executor needs only the standard library. It checks the executors
its tasks land on (one task per core of the default parallelism); an executor that
joins later (dynamic allocation, a replaced node) is not probed. There the task itself
says what is missing: every function a query hands Spark is a
:func:`shipped_function`, a closure over plain data (the query text, Arrow schemas as
IPC bytes, the settings' values, :data:`HOW_TO_SHIP`) that references only the standard
library, so Spark unpickles it on any executor. Called there, it imports what the task
needs, and where that fails raises one ``RuntimeError`` that names the interpreter,
what it lacks and how to ship matchsql (inside Spark's stack trace, but as one line,
not an unpickling failure). Where the imports succeed, the worker side rebuilds the
query's plan from the data, once per worker process (see
:func:`matchsql.integrations.spark.worker.shipped_plan`). matchsql itself unpickles
nothing: data from another process is never turned into code.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from matchsql.errors import ExecutionError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# What a task imports: the worker module (and through it matchsql's matchers, DuckDB,
# numpy, numba, sqlglot), and the Arrow and pandas that Spark's Arrow UDFs hand over.
REQUIRED = ("pyarrow", "pandas", "matchsql.integrations.spark.worker")

HOW_TO_SHIP = (
    "Every executor's Python needs matchsql and its dependencies (pyarrow, pandas, numpy, "
    "duckdb, numba, sqlglot), in the same Python minor version as the driver. Either "
    "install them into the executors' Python (PYSPARK_PYTHON / spark.pyspark.python names "
    "it), or ship them with the application: a packed virtualenv (venv-pack -o env.tar.gz; "
    "spark-submit --archives env.tar.gz#env --conf spark.pyspark.python=./env/bin/python), "
    "or, where the dependencies are on the executors already, matchsql's package as a zip "
    "(pip wheel --no-deps <matchsql source>, and copy the wheel to matchsql.zip: Spark puts "
    ".zip files on the workers' path, not .whl; spark-submit --py-files matchsql.zip, or "
    "in a running session spark.sparkContext.addPyFile('matchsql.zip'), over Spark Connect "
    "spark.addArtifacts('matchsql.zip', pyfile=True)). See 'Shipping matchsql to a "
    "cluster' in docs/spark.md."
)

_checked: set[tuple] = set()  # sessions (and worker interpreters) whose executors passed


class ExecutorSetupError(ExecutionError):
    """Spark's Python workers cannot import matchsql or a dependency of it."""


def check_executors(spark: SparkSession) -> None:
    """Raise :class:`ExecutorSetupError` unless the executors' Python imports matchsql's
    worker side; one small job the first time per session and worker interpreter."""
    key = _session_key(spark)
    if key in _checked:
        return
    problems = _probe(spark)
    if problems:
        raise ExecutorSetupError(
            "Spark's Python workers cannot run matchsql: "
            + "; ".join(problems)
            + ". "
            + HOW_TO_SHIP
        )
    _checked.add(key)


def _session_key(spark: Any) -> tuple:
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        return ("connect", getattr(spark, "session_id", id(spark)))
    context = spark.sparkContext
    return ("classic", context.applicationId, context.pythonExec)


def probe_function(modules: tuple[str, ...]):
    """The UDF body: imports ``modules`` on the executor and reports, as JSON, the
    interpreter and what failed to import (a closure, so it travels by value)."""

    def probe(_: Any) -> str:
        missing = {}
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception as exc:  # an ImportError, or a module that fails on import
                missing[name] = f"{type(exc).__name__}: {exc}"
        version = ".".join(map(str, sys.version_info[:3]))
        return json.dumps({"python": sys.executable, "version": version, "missing": missing})

    return probe


def shipped_function(module: str, entry: str, data: Any) -> Callable[..., Any]:
    """A function for Spark to run on its executors: ``module.entry(data, *arguments)``.

    The closure holds ``data``, which must be plain data (:func:`plain`), the names
    ``module`` and ``entry``, and :data:`HOW_TO_SHIP` as a string; it refers to no
    matchsql name, so cloudpickle sends it by value and Spark unpickles it with the
    standard library alone, on any executor, even one that joined after the probe.
    There, at call time, it imports pyarrow and ``module`` and raises a
    ``RuntimeError`` naming what the executor's Python lacks, with the shipping advice,
    where that fails. It takes one argument or more (a ``mapInArrow`` or
    ``applyInArrow`` function takes one, an ``applyInPandasWithState`` function three)
    and has no annotations: Spark reads an ``applyInArrow`` function's kind from its
    parameters and type hints.
    """
    if not plain(data):
        raise TypeError(f"a shipped function's data must be plain data, got {data!r:.200}")
    requires = ("pyarrow", module)
    advice = HOW_TO_SHIP

    def shipped(first, *more):
        missing = []
        for name in requires:
            try:
                # The executor-side import, deliberately at call time: the closure must
                # unpickle where matchsql is missing, to say so here.
                importlib.import_module(name)
            except Exception as exc:  # an ImportError, or a module that fails on import
                missing.append(f"{name} ({type(exc).__name__}: {exc})")
        if missing:
            version = ".".join(map(str, sys.version_info[:3]))
            raise RuntimeError(
                f"matchsql cannot run on this Spark executor: {sys.executable} "
                f"(Python {version}) lacks {', '.join(missing)}. {advice}"
            )
        return getattr(sys.modules[module], entry)(data, first, *more)

    return shipped


_PLAIN = (str, int, float, bool, bytes, type(None))


def plain(value: Any) -> bool:
    """Whether ``value`` is plain data (str, int, float, bool, None, bytes, and tuples,
    lists and dicts of those): what a shipped function may carry, because unpickling
    it needs nothing but the standard library and runs no code of ours."""
    kind = type(value)  # exact types: a subclass would be pickled by reference to its module
    if kind in _PLAIN:
        return True
    if kind in (tuple, list):
        return all(plain(item) for item in value)
    if kind is dict:
        return all(plain(key) and plain(item) for key, item in value.items())
    return False


def _probe(spark: SparkSession) -> list[str]:
    """What the executors lack, one line per interpreter that lacks something."""
    from pyspark.sql import functions as F

    tasks = _parallelism(spark)
    check = F.udf(probe_function(REQUIRED), "string", useArrow=False)
    try:
        found = (
            spark.range(0, tasks, 1, tasks)
            .select(check(F.col("id")).alias("report"))
            .distinct()
            .collect()
        )
    except Exception as exc:  # the workers did not start, or could not unpickle the probe
        return [f"the probe job failed ({cause(exc)})"]
    problems = []
    for (text,) in found:
        report = json.loads(text)
        if report["missing"]:
            lacks = ", ".join(f"{name} ({why})" for name, why in sorted(report["missing"].items()))
            problems.append(f"{report['python']} (Python {report['version']}) lacks {lacks}")
    return problems


# Lines of a Spark error that say why the Python workers failed, most telling first.
_CAUSES = (
    re.compile(r"No module named '[^']+'"),
    re.compile(r"Cannot run program \"[^\"]*\"[^\n]*"),
    re.compile(r"\[PYTHON_VERSION_MISMATCH\][^\n]*"),
)


def cause(exc: BaseException | str) -> str:
    """The line of a Spark error that says why, not its stack trace."""
    text = str(exc)
    for pattern in _CAUSES:
        found = pattern.search(text)
        if found:
            return found.group(0).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("at ", "...", "Caused by")):
            return line[:300]
    return type(exc).__name__ if isinstance(exc, BaseException) else "unknown error"


def _parallelism(spark: SparkSession) -> int:
    """Enough probe tasks to reach every executor of a small cluster (Spark spreads them)."""
    try:
        return max(1, min(64, int(spark.sparkContext.defaultParallelism)))
    except Exception:  # Spark Connect has no SparkContext
        return max(1, min(64, int(spark.conf.get("spark.sql.shuffle.partitions") or 2)))
