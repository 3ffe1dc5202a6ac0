"""What a statement handler sees of the executor that runs it.

The executor loads its heavy handlers (MATCH_RECOGNIZE statements, row pattern
windows) on first use and hands itself to them. They know it only through
:class:`StatementHost`, so the executor's module sits above theirs and no
import, not even one for type checking, points back up.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import duckdb

from matchsql.config import Config
from matchsql.errors import Error
from matchsql.runtime.cancel import Cancellation
from matchsql.session.failure import StatementFailure
from matchsql.session.statement_kinds import Statement

if TYPE_CHECKING:
    import pyarrow as pa

    from matchsql.engine.compiled_query import CompiledQueries
    from matchsql.execution.workers.session import WorkerSession
    from matchsql.session.stream_statements import StreamStatements

#: The values of a statement's parameters (``?``, ``$1``, ``$name``).
Params = Sequence[Any] | Mapping[str, Any] | None


class StatementHost(Protocol):
    """The executor's side of a statement: its connection, settings, failure and runners."""

    con: duckdb.DuckDBPyConnection
    config: Config
    #: The running statement's first error inside its readers (DuckDB only sees a failing
    #: stream): a reader takes it when it is made, as it takes :attr:`cancellation`.
    failure: StatementFailure
    #: Cursors running MATCH_RECOGNIZE inputs: an interrupt stops them too.
    cursors: set[duckdb.DuckDBPyConnection]
    #: The caller's variables while a statement runs (replacement scans).
    scope: Mapping[str, Any]

    @property
    def cancellation(self) -> Cancellation: ...

    @property
    def streams(self) -> StreamStatements: ...

    @property
    def workers(self) -> WorkerSession: ...

    @property
    def compiled(self) -> CompiledQueries: ...

    def dispatch(self, statement: Statement, params: Params = None) -> Any: ...

    def run_duckdb(
        self,
        sql: str,
        cleanups: list[Callable[[], None]],
        params: Params = None,
        live: dict[str, pa.RecordBatchReader] | None = None,
        stats: dict | None = None,
        kind: duckdb.StatementType | None = None,
        before: Callable[[], None] | None = None,
    ) -> Any: ...

    def translator(self, failure: StatementFailure) -> Callable[[duckdb.Error | Error], Error]:
        """The ``translate`` of a Result of the running statement, whose ``failure`` it is."""
        ...

    def translate(self, exc: duckdb.Error) -> Error: ...

    def unregister(self, view: str) -> None: ...

    def watch(self, cursor: duckdb.DuckDBPyConnection) -> Callable[[], None]:
        """Let an interrupt stop ``cursor``'s queries until the returned function is called."""
        ...


class MatchStatements(Protocol):
    """What a row pattern window needs of the MATCH_RECOGNIZE runner: its host, and a
    statement with MATCH_RECOGNIZE run to a Result."""

    executor: StatementHost

    def run_match_recognize(self, statement: str) -> Any: ...
