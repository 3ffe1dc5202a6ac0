"""GPU column path (CuPy + numba.cuda), testable under the CUDA simulator."""
