"""GPU column path (numba.cuda; numpy stands in for CuPy), testable under the CUDA simulator.

Nothing here is imported by ``import matchsql``: the planner asks
:mod:`matchsql.gpu.device` only when a query is planned, and the kernels
(:mod:`matchsql.gpu.kernels`) are imported only when the GPU path runs.
"""

from matchsql.compile_cache import use_keyed_cache

use_keyed_cache()  # before any kernel below is defined: see compile_cache
