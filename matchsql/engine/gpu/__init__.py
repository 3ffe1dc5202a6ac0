"""GPU column path (numba.cuda; numpy stands in for CuPy), testable under the CUDA simulator.

Nothing here is imported by ``import matchsql``: the planner asks
:mod:`matchsql.engine.gpu.device` only when a query is planned, and the kernels
(:mod:`matchsql.engine.gpu.kernels`) are imported only when the GPU path runs.
"""

from matchsql.runtime.compile_cache import use_keyed_cache

use_keyed_cache()  # before any kernel below is defined: see compile_cache
