"""A statement's rows as a :class:`~matchsql.results.result.Result`: read, rendered, plotted.

Below the session layer that makes Results and the Python API and CLI that hand
them out; nothing here imports either.
"""
