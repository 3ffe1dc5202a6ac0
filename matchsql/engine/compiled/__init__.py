"""Compiled execution paths: the same rows as the reference matcher, much faster.

* :mod:`.lowering` turns the automaton program and the DEFINE conditions into
  plain numpy arrays (instructions, register bytecode);
* :mod:`.rowlocal` evaluates the row-local part of DEFINE column-wise;
* :mod:`.kernel` is the numba-compiled thread VM over those arrays;
* :mod:`.measures` builds ONE ROW PER MATCH output column-wise;
* :mod:`.compiled_matcher` is the resumable per-partition matcher tying them together.

Which path a query takes is decided in :mod:`matchsql.engine.planner`.
"""

from matchsql.runtime.compile_cache import use_keyed_cache

use_keyed_cache()  # before any kernel below is defined: see compile_cache
