"""Process-wide services: cancellation, compile cache, memory, deep recursion, progress."""
