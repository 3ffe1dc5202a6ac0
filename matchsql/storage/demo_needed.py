"""Whether a statement may read the demo table: decided from its text alone, before
the table (numpy, pyarrow: see :mod:`matchsql.storage.demo`) is built."""

from __future__ import annotations

import re

from matchsql.grammar.sqltext import split_script

_TABLE_WORDS = re.compile(r"\b(FROM|JOIN)\b", re.IGNORECASE)
_NO_TABLES = ("SELECT", "VALUES", "SET", "RESET")


def needs_demo(text: str) -> bool:
    """Whether ``text`` might see the demo table, so that it must be built first.

    Only statements that begin with ``SELECT``/``VALUES`` and never say FROM
    or JOIN (``SELECT 1``), and ``SET``/``RESET``, cannot name a table; any
    other (a catalog listing, ``DESCRIBE``, a leading comment, MATCH_RECOGNIZE)
    builds it, which is never wrong, only slower. Pure text: no parse, so
    that ``SELECT 1`` stays as quick as in DuckDB.
    """
    for statement in split_script(text):
        words = statement.text.split(None, 1)
        if (
            not words
            or words[0].rstrip(";").upper() not in _NO_TABLES
            or _TABLE_WORDS.search(statement.text)
        ):
            return True
    return False
