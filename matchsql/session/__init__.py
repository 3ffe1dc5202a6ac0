"""The session layer: one connection's statements, classified and dispatched.

Lower layers (grammar, fsm, router, storage) never import it; the Python API
(:mod:`matchsql.api`) and the CLI sit above it.
"""
