"""Execution path selection: which matcher runs a query, and why.

``choose_path(spec)`` tries the compiled paths in order of speed and says why
it settled where it did; ``new_partition_matcher(spec, key, config)`` is the
factory the executor (and Spark, streams) use. Plans are kept in the spec's
own memo (:class:`~matchsql.plan.spec.PlanMemo`), so a query's DEFINEs and
measures are lowered once, not once per partition, and a spec made from
another by ``dataclasses.replace`` plans for itself. ``config.execution_path``
forces a path: forcing one that does not apply is an error that names the
reason, never a silent fallback.

:func:`physical` decides the rest of how a one-time query's partitions run
(threads, batched partitions, worker processes) once per config, and holds the
reasons EXPLAIN prints (:func:`explain`).

Paths (docs/execution.md has them for users, docs/architecture.md the layers around them):

* ``row_local``: every DEFINE term reads only the current row and physical
  PREV/NEXT offsets; the terms are evaluated column-wise and the compiled
  kernel runs the automaton;
* ``registers``: some terms read ``A.x``, FIRST/LAST or other rows of the
  match; the kernel carries the rows those reads locate as registers and
  interprets the terms' bytecode;
* ``reference``: everything else (and the oracle of both).

On top of these, ``config.gpu`` picks the GPU column path (:mod:`matchsql.engine.gpu`)
for the queries it takes (:func:`matchsql.engine.gpu.gpu_plan.unsupported`): ``'on'``
forces it, ``'auto'`` takes it on a real CUDA device for partitions whose estimated work reaches
``gpu_min_work`` (never on the simulator, which is for tests), ``'off'`` never.

The planner sits above the automaton (:mod:`matchsql.engine`) and the GPU path
(:mod:`matchsql.engine.gpu`, itself built on the engine's lowering), so neither
imports it. The session imports the planner only when a statement runs a
MATCH_RECOGNIZE, so a session that runs none never loads numba; the GPU
matchers (:mod:`matchsql.engine.gpu.gpu_matcher`, :mod:`matchsql.engine.gpu.gpu_live`), which load
numba.cuda, an optional dependency, are imported where a query takes the GPU path.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from matchsql.config import Config, format_size
from matchsql.engine.compiled import batch as whole
from matchsql.engine.compiled.batch import WholePartitions
from matchsql.engine.compiled.chunks import unsplittable
from matchsql.engine.compiled.compiled_matcher import CompiledMatcher, CompiledPlan
from matchsql.engine.compiled.dfa import for_matcher
from matchsql.engine.compiled.lowering import Unsupported
from matchsql.engine.compiled.prefilter import relaxed_dfa, second_row
from matchsql.engine.gpu import device, gpu_plan
from matchsql.engine.matcher import Matcher
from matchsql.engine.program import compile_pattern
from matchsql.engine.reference import CompiledQuery, ReferenceMatcher
from matchsql.errors import ExecutionError
from matchsql.plan.spec import MatchSpec
from matchsql.runtime.cancel import Cancellation

PATHS = ("auto", "reference", "row_local", "registers")


@dataclass(frozen=True)
class PathChoice:
    """The chosen path (``row_local``, ``registers`` or ``reference``) and why."""

    name: str
    reason: str
    notes: tuple[str, ...] = ()


def _plan(spec: MatchSpec) -> tuple[CompiledQuery, CompiledPlan | None, str]:
    """The compiled plan of ``spec`` or the reason there is none (kept in its memo)."""
    cached = spec.memo.get("lowering")
    if cached is None:
        query = CompiledQuery(spec)
        try:
            cached = (query, CompiledPlan.build(spec, query), "")
        except Unsupported as exc:
            cached = (query, None, str(exc))
        spec.memo["lowering"] = cached
    return cached


def _compiled(spec: MatchSpec) -> CompiledPlan:
    """The compiled plan of ``spec``, asked for where a compiled (or the GPU) path runs."""
    plan = _plan(spec)[1]
    assert plan is not None, "a compiled path was chosen for a query without a plan"
    return plan


def choose_path(spec: MatchSpec, requested: str = "auto") -> PathChoice:
    """Pick the path for ``spec``; ``requested`` is ``config.execution_path``."""
    if requested not in PATHS:
        raise ExecutionError(f"execution_path must be one of {', '.join(PATHS)}")
    if requested == "reference":
        return PathChoice("reference", "forced by SET execution_path = 'reference'")
    _, plan, why_not = _plan(spec)
    if plan is None:
        if requested != "auto":
            raise ExecutionError(
                f"execution_path '{requested}' does not apply to this query: {why_not}"
            )
        return PathChoice("reference", f"no compiled path applies: {why_not}")
    notes = tuple(plan.notes)
    if requested == "auto":
        if plan.path == "row_local":
            reason = "every DEFINE reads only the current row and physical PREV/NEXT offsets"
        else:
            reason = (
                "DEFINE reads other rows of the match (A.x, FIRST/LAST, running "
                "aggregates); threads carry them as registers"
            )
        return PathChoice(plan.path, reason, notes)
    if requested == "row_local" and plan.path != "row_local":
        raise ExecutionError(
            "execution_path 'row_local' does not apply to this query: a DEFINE reads other "
            "rows of the match (A.x, FIRST/LAST, ...); use 'registers' or 'auto'"
        )
    # 'registers' runs every query the row-local path runs (with no registers).
    return PathChoice(requested, "forced by SET execution_path", notes)


def gpu_path(spec: MatchSpec, config: Config, live: bool = False) -> PathChoice | None:
    """The GPU path's choice for ``spec`` under ``config.gpu`` (None: a CPU path runs);
    ``gpu = 'on'`` where the path cannot run is an error naming the reason. ``live``:
    a continuous query; it runs on the GPU path (a launch per batch) only where
    ``gpu = 'on'`` asks for it: under ``'auto'`` the work of a stream's partition is
    not known in advance, and a launch per small batch does not pay."""
    if config.gpu == "off" or (config.gpu == "auto" and config.execution_path != "auto"):
        return None  # under 'auto', SET execution_path forces a CPU path
    _, plan, why_not = _plan(spec)
    why = gpu_plan.unsupported(spec, plan, why_not)
    if config.gpu == "auto" and (why is not None or live):
        return None  # decided without loading numba.cuda
    found = device.detect()
    if not found.present:
        if config.gpu == "on":
            raise ExecutionError(device.NO_DEVICE)
        return None
    if why is not None:
        raise ExecutionError(f"gpu = 'on' does not apply to this query: {why}")
    if config.gpu == "auto" and found.simulated:
        return None
    estimate = (
        f"work estimate: rows x window, window the rows an attempt may read "
        f"(max_buffered_bytes = {format_size(config.max_buffered_bytes)} over the "
        f"partition's row width); device: {found.name}"
    )
    if config.gpu == "on":
        return PathChoice("gpu", "forced by SET gpu = 'on'", (estimate,))
    return PathChoice(
        "gpu",
        f"CUDA device present; partitions with rows x window >= "
        f"gpu_min_work={config.gpu_min_work} run on it, smaller ones on "
        f"the CPU",
        (estimate,),
    )


def new_partition_matcher(
    spec: MatchSpec,
    key: tuple = (),
    config: Config | None = None,
    cancel: Cancellation | None = None,
    live: bool = False,
    gather: bool = False,
) -> Matcher:
    """A resumable matcher for one partition on the path chosen for ``spec``; it stops
    with "statement interrupted" once ``cancel`` (the statement's) is set. ``live``: the
    partition belongs to a continuous query (see :func:`gpu_path`). ``gather``: a
    one-time query's, which may hold several batches before matching them split
    (:func:`matchsql.engine.compiled.chunks.gather_rows`)."""
    config = config or Config()
    if gpu_path(spec, config, live) is not None:
        from matchsql.engine.gpu.gpu_live import LiveGpuMatcher
        from matchsql.engine.gpu.gpu_matcher import GpuMatcher

        if live:
            return LiveGpuMatcher(_compiled(spec), key, config, cancel)
        min_work = config.gpu_min_work if config.gpu == "auto" else 0
        return GpuMatcher(_compiled(spec), key, config, cancel, min_work)
    choice = choose_path(spec, config.execution_path)
    if choice.name == "reference":
        # SET execution_path = 'reference' lowers nothing: the reference compiles its own
        query = _plan(spec)[0] if config.execution_path != "reference" else None
        return ReferenceMatcher(query if query is not None else spec, key, config, cancel)
    return CompiledMatcher(_compiled(spec), key, config, cancel, gather)


@dataclass(frozen=True)
class PhysicalPlan:
    """How a spec's partitions run in a one-time query under one config, decided once.

    Each answer comes with the reason EXPLAIN prints. ``path`` is the CPU path
    (``path_error``: why none applies, a forced one); ``gpu`` the GPU path's choice
    where it takes the query (``gpu_error``: why ``gpu = 'on'`` cannot run it).
    ``config`` is a copy of the settings it was decided under.
    """

    config: Config
    path: PathChoice | None
    path_error: str | None
    gpu: PathChoice | None
    gpu_error: str | None
    threads: int
    threads_why: str
    split: str | None  # whether a long partition is matched in chunks, and why (CPU paths)
    whole: WholePartitions | None
    whole_why: str
    workers: bool  # partitions on worker processes (SET workers = N, with PARTITION BY)
    lines: tuple[str, ...]  # EXPLAIN's lines from ``path:`` to ``batched:``

    @property
    def choice(self) -> PathChoice:
        """The path that runs the partitions (the GPU's where it takes them); an
        :class:`ExecutionError` where none applies."""
        if self.gpu_error is not None:
            raise ExecutionError(self.gpu_error)
        if self.gpu is not None:
            return self.gpu
        if self.path is None:
            raise ExecutionError(self.path_error or "no applicable path")
        return self.path


def physical(spec: MatchSpec, config: Config | None = None) -> PhysicalPlan:
    """The physical plan of ``spec`` under ``config``, kept in the spec's memo per the
    config's values (a ``SET`` between two runs gets a plan of its own)."""
    config = config or Config()
    key = ("physical", tuple(getattr(config, name) for name in Config.names()))
    found = spec.memo.get(key)
    if found is None:
        found = spec.memo[key] = _decide(spec, dataclasses.replace(config))
    return found


def _decide(spec: MatchSpec, config: Config) -> PhysicalPlan:
    """Every answer of the plan from one choice of path: a forced path that does not apply
    is kept as its message (the first partition raises it, EXPLAIN prints it)."""
    gpu, gpu_error = None, None
    try:
        gpu = gpu_path(spec, config)
    except ExecutionError as exc:
        gpu_error = exc.message
    path, path_error = None, None
    try:
        path = choose_path(spec, config.execution_path)
    except ExecutionError as exc:
        path_error = exc.message
    # the CPU path that runs the partitions; None where the GPU takes them or none applies
    cpu = path if gpu is None and gpu_error is None else None
    threads, threads_why = _threads(spec, config, gpu, cpu)
    split = split_partitions(spec, config) if cpu is not None and cpu.name != "reference" else None
    whole, whole_why = _whole(spec, config, gpu, cpu)
    plan = PhysicalPlan(
        config,
        path,
        path_error,
        gpu,
        gpu_error,
        threads,
        threads_why,
        split,
        whole,
        whole_why,
        config.workers > 1 and bool(spec.partition_by),
        (),
    )
    return dataclasses.replace(plan, lines=tuple(_lines(spec, plan)))


def _threads(
    spec: MatchSpec, config: Config, gpu: PathChoice | None, cpu: PathChoice | None
) -> tuple[int, str]:
    """See :func:`partition_threads`."""
    if config.threads <= 1:
        return 1, "SET threads = 1"
    if not spec.partition_by:
        return 1, "no PARTITION BY: one partition"
    if gpu is not None:
        return 1, "partitions share one device"
    if cpu is None:
        return 1, "no applicable path"
    if cpu.name != "reference":
        plan = _compiled(spec)
        if for_matcher(plan, config)[0] is not None and whole.unsupported(plan) is not None:
            return 1, (
                "row-local partitions on the DFA, not batched, are too short for a thread pool"
            )
    return config.threads, f"partitions spread over {config.threads} threads"


def _whole(
    spec: MatchSpec, config: Config, gpu: PathChoice | None, cpu: PathChoice | None
) -> tuple[WholePartitions | None, str]:
    """See :func:`whole_partitions`."""
    if not spec.partition_by:
        return None, "one partition"
    if gpu is not None:
        return None, "GPU path"
    if cpu is None:
        return None, "no applicable path"
    if cpu.name == "reference":
        return None, "reference path"
    plan = _compiled(spec)
    why = whole.unsupported(plan)
    if why is not None:
        return None, why
    return WholePartitions(plan, config), "partitions inside one input batch are matched together"


def _lines(spec: MatchSpec, plan: PhysicalPlan) -> list[str]:
    """EXPLAIN's lines about the path: which, why, the automaton, threads, split, batched."""
    config = plan.config
    try:
        choice = plan.choice
        lines = [f"path: {choice.name}", f"why: {choice.reason}", *choice.notes]
        if choice.name not in ("reference", "gpu"):
            compiled = _compiled(spec)
            dfa, why = for_matcher(compiled, config)
            lines.append(
                f"automaton: DFA ({dfa.states} states)"
                if dfa is not None
                else f"automaton: thread VM ({why})"
            )
            relaxed = relaxed_dfa(compiled) if dfa is None else None
            if relaxed is not None:
                line = (
                    f"prefilter: starts ruled out by the row-local conditions "
                    f"(DFA of {relaxed.states} states)"
                )
                if second_row(compiled) is not None:
                    line += ", and by the register conditions on the second row"
                lines.append(line)
        threads = "sequential" if plan.threads == 1 else f"{plan.threads} threads"
        lines.append(f"partitions: {threads} ({plan.threads_why})")
        if plan.split is not None:
            lines.append(f"split: {plan.split}")
        if spec.partition_by:
            lines.append(f"batched: {'yes' if plan.whole is not None else 'no'} ({plan.whole_why})")
    except ExecutionError as exc:
        lines = ["path: none", f"why: {exc.message}"]
    return lines


def partition_threads(spec: MatchSpec, config: Config | None = None) -> tuple[int, str]:
    """How many threads run ``spec``'s partitions of a one-time query, and why.

    A thread pool pays off only where a partition's matching is long next to
    the Python work around it: the GIL serialises the rest. Measured on this
    project's 2-core bench (bench/paths.py, 1M rows, 500 partitions): the
    registers kernel gains up to 1.1x, row-local partitions on the DFA one by
    one lose 25% (their kernel takes 3 ms per million rows, the per-partition
    Python dominates), but batched (:func:`whole_partitions`: a task matches
    a group of partitions in one pass) they gain 1.07-1.19x (50-500
    partitions, A B+ C+). A single partition has nothing to spread here: its
    rows are split into chunks instead (:func:`split_partitions`).
    """
    plan = physical(spec, config)
    return plan.threads, plan.threads_why


def split_partitions(spec: MatchSpec, config: Config) -> str:
    """Whether a long partition of ``spec`` is matched in chunks on several threads
    (:mod:`matchsql.engine.compiled.chunks`), and why (EXPLAIN's ``split`` line)."""
    plan = _compiled(spec)
    why = unsplittable(spec, plan.registers.arrays()[0], plan.within)
    if why is not None:
        return f"no ({why})"
    if config.split_rows == 0 or config.threads <= 1:
        return "no (SET threads = 1 or split_rows = 0)"
    return (
        f"rows to match in chunks of >= {config.split_rows} rows on {config.threads} "
        "threads, fixed up to the sequential result"
    )


def whole_partitions(
    spec: MatchSpec, config: Config | None = None
) -> tuple[WholePartitions | None, str]:
    """``(matcher, why)``: a :class:`~matchsql.engine.compiled.batch.WholePartitions`
    that matches the complete partitions of a sorted batch together, or None
    and the reason it does not apply."""
    plan = physical(spec, config)
    return plan.whole, plan.whole_why


#: A string literal of SQL text (quotes doubled inside).
_STRING = re.compile(r"'(?:[^']|'')*'")
_SHOWN_CHARS = 60


def _abridged(sql: str) -> str:
    """``sql`` with every long string literal cut short: a folded ``IN (SELECT ...)`` of
    ten thousand values is one such string, which made EXPLAIN a line of 78,000
    characters."""

    def cut(found: re.Match) -> str:
        text = found.group(0)
        if len(text) <= 2 * _SHOWN_CHARS:
            return text
        return f"{text[:_SHOWN_CHARS]}...' ({len(text) - 2:,} characters)"

    return _STRING.sub(cut, sql)


def explain(spec: MatchSpec, config: Config | None = None) -> str:
    """EXPLAIN text of one MATCH_RECOGNIZE: the program, the chosen path and why."""
    lines = list(physical(spec, config).lines)
    for name, sql in spec.derived.items():  # DuckDB's parts of the query
        lines.append(f"DuckDB computes in the input: {name} = {_abridged(sql)}")
    for measure in spec.projection:
        if measure.by_duckdb:
            lines.append(f"DuckDB computes over the matches: {measure.name} = {measure.sql}")
    path = "\n".join(lines)
    program = compile_pattern(spec.pattern)
    return (
        f"MATCH_RECOGNIZE PATTERN ({spec.pattern.to_sql()})\n{path}\n"
        f"program ({len(program)} instructions, {program.loops} loops):\n"
        f"{program.dump()}"
    )
