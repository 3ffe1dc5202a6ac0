"""Process-wide services: cancellation, compile cache, memory, deep recursion, progress,
the garbage collector's view of the engine."""
