"""Statement boundaries in SQL text, found by a small lexer instead of a parser.

The REPL must decide after every Enter whether the buffer holds a finished
statement, a script runner must say which statement failed, and a session
runs a text one statement at a time. All need to know where statements end
even when the text is not valid SQL yet (or never will be), or is not SQL
that DuckDB's or sqlglot's parser knows (MATCH_RECOGNIZE, CREATE STREAM), so
this is a tolerant scan: a ``;`` ends a statement unless
it sits inside a string (``'...'``, ``E'...'``, ``$tag$...$tag$``), a quoted
identifier (``"..."``) or a comment (``--``, ``/* */``). Everything else,
``MATCH_RECOGNIZE`` included, is opaque text here, except a ``PATTERN ( ... )``
body: its ``$`` is the end anchor, not a dollar quote.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from matchsql.errors import ParseError
from matchsql.grammar.kept_texts import kept_per_text

_DOLLAR_TAG = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")
# ``PATTERN (``: a row pattern body, where ``$`` is the end anchor, not a dollar quote.
_PATTERN_OPEN = re.compile(r"PATTERN\s*\(", re.IGNORECASE)


@dataclass(frozen=True)
class Statement:
    """One statement of a script: its text (without the ``;``) and where it starts."""

    text: str  # from its code on: the comments before it left out
    offset: int  # character offset of the first character of code in the script
    line: int  # 1-based line of that character
    source: str = ""  # as written: the comments before its code kept
    source_offset: int = 0  # character offset of its first non-blank character


@dataclass
class _Scan:
    """Outcome of scanning a text: statement end offsets and the state at the end."""

    ends: list[int]  # offsets of the terminating ``;`` characters
    open_quote: str | None  # the construct left open at the end, or None


def _scan(text: str) -> _Scan:
    ends: list[int] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == ";":
            ends.append(i)
            i += 1
        elif ch == "-" and text.startswith("--", i):
            newline = text.find("\n", i)
            i = n if newline < 0 else newline + 1
        elif ch == "/" and text.startswith("/*", i):
            close = text.find("*/", i + 2)
            if close < 0:
                return _Scan(ends, "/*")
            i = close + 2
        elif ch in "'\"":
            escaped = ch == "'" and i > 0 and text[i - 1] in "eE" and not _word_char(text, i - 2)
            close = _close_quote(text, i + 1, ch, backslash=escaped)
            if close < 0:
                return _Scan(ends, ch)
            i = close + 1
        elif (
            ch in "pP" and not _word_char(text, i - 1) and (opened := _PATTERN_OPEN.match(text, i))
        ):
            close = pattern_body_end(text, opened.end())
            if close >= n:
                return _Scan(ends, "PATTERN (")
            i = close + 1
        elif ch == "$":
            tag = _DOLLAR_TAG.match(text, i)
            if tag is None or _word_char(text, i - 1):
                i += 1
                continue
            close = text.find(tag.group(0), tag.end())
            if close < 0:
                return _Scan(ends, tag.group(0))
            i = close + len(tag.group(0))
        else:
            i += 1
    return _Scan(ends, None)


def pattern_body_end(sql: str, begin: int) -> int:
    """Offset of the ``)`` closing a PATTERN whose body starts at ``begin`` (after its ``(``).

    Uses the pattern language's own lexical rules: parentheses nest and
    ``"..."`` quotes a variable name; nothing else is special. A ``'...'``
    (no pattern has one) is skipped whole too, so that a function called
    ``pattern`` with a string argument cannot end early. Returns ``len(sql)``
    when the body is not closed.
    """
    depth, i, n = 1, begin, len(sql)
    while i < n:
        ch = sql[i]
        if ch in "\"'":
            close = _close_quote(sql, i + 1, ch, backslash=False)
            if close < 0:
                return n
            i = close + 1
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return n


def _word_char(text: str, i: int) -> bool:
    return 0 <= i < len(text) and (text[i].isalnum() or text[i] == "_")


def _close_quote(text: str, i: int, quote: str, *, backslash: bool) -> int:
    """Offset of the quote closing a literal whose body starts at ``i``; -1 if none."""
    n = len(text)
    while i < n:
        ch = text[i]
        if backslash and ch == "\\":
            i += 2
            continue
        if ch == quote:
            if i + 1 < n and text[i + 1] == quote:  # doubled quote: an escaped quote
                i += 2
                continue
            return i
        i += 1
    return -1


def is_blank(text: str) -> bool:
    """True when ``text`` holds only whitespace and comments (nothing to run)."""
    return not _strip_comments(text).strip()


def _strip_comments(text: str) -> str:
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text.startswith("--", i):
            newline = text.find("\n", i)
            i = n if newline < 0 else newline
        elif text.startswith("/*", i):
            close = text.find("*/", i + 2)
            i = n if close < 0 else close + 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def split_script(text: str) -> list[Statement]:
    """The statements of ``text``, in order; the last one may lack its ``;``.

    This is matchsql's one statement splitter: the session's statements (whose
    kinds DuckDB's parser adds where it accepts the text), the shell's and the
    REPL's all come from here, so no two parts of matchsql can disagree on
    where a statement ends. Blank statements (only whitespace or comments) are
    dropped. An unterminated string or comment runs to the end of the text,
    where the engine reports it. A text split lately is not scanned again
    (:mod:`matchsql.grammar.kept_texts`).
    """
    return list(_kept_split(text))


def _split(text: str) -> tuple[Statement, ...]:
    scan = _scan(text)
    statements: list[Statement] = []
    start = 0
    for end in [*scan.ends, len(text)]:
        chunk = text[start:end]
        if not is_blank(chunk):
            offset = start + _code_start(chunk)
            source_offset = start + len(chunk) - len(chunk.lstrip())
            statements.append(
                Statement(
                    text[offset:end].rstrip(),
                    offset,
                    text.count("\n", 0, offset) + 1,
                    text[source_offset:end].rstrip(),
                    source_offset,
                )
            )
        start = end + 1
    return tuple(statements)


_kept_split = kept_per_text(_split)


def split_statements(text: str) -> list[tuple[str, int]]:
    """Each statement of ``text`` as written (the comments before its code kept, no
    ``;``) and the offset where it starts: :func:`split_script`'s statements."""
    return [(statement.source, statement.source_offset) for statement in split_script(text)]


def _code_start(text: str) -> int:
    """Offset of the first character that is neither whitespace nor in a comment."""
    i, n = 0, len(text)
    while i < n:
        if text[i].isspace():
            i += 1
        elif text.startswith("--", i):
            newline = text.find("\n", i)
            i = n if newline < 0 else newline + 1
        elif text.startswith("/*", i):
            close = text.find("*/", i + 2)
            i = n if close < 0 else close + 2
        else:
            return i
    return n


def is_complete(text: str) -> bool:
    """True when ``text`` ends a statement: the last non-blank code is a ``;``.

    A ``;`` inside a string, quoted identifier or comment does not count, and
    neither does text that is only whitespace and comments.
    """
    scan = _scan(text)
    if scan.open_quote is not None or not scan.ends:
        return False
    return is_blank(text[scan.ends[-1] + 1 :])


def open_construct(text: str) -> str | None:
    """The string quote, identifier quote, dollar tag or ``/*`` left open at the end."""
    return _scan(text).open_quote


#: Longest identifier (bare or quoted; any run of word characters, in fact) and
#: string literal a statement may hold.
MAX_IDENTIFIER = 10_000
MAX_LITERAL = 1_000_000

_LONG_TEXT = (
    (
        re.compile(rf"[^\W\d]\w{{{MAX_IDENTIFIER}}}"),
        f"identifier or word longer than {MAX_IDENTIFIER} characters",
    ),
    (
        re.compile(rf'"[^"]{{{MAX_IDENTIFIER}}}'),
        f"quoted identifier longer than {MAX_IDENTIFIER} characters",
    ),
    (
        re.compile(rf"'[^']{{{MAX_LITERAL}}}"),
        f"string literal longer than {MAX_LITERAL} characters",
    ),
)


def check_text(text: str) -> None:
    """Refuse statement text that no later stage can handle, before any of them runs.

    A lone surrogate (``'\\ud800'`` from Python) is not Unicode text: DuckDB
    and every encoder reject it deep inside with TypeErrors. Overlong names
    and literals would be tokenized character by character before any limit
    applied. Both checks are single C-level scans. The error's excerpt shows
    the text with surrogates replaced, so that printing it cannot fail.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        shown = text.encode("utf-8", "replace").decode("utf-8")
        code = f"\\u{ord(text[exc.start]):04x}"
        raise ParseError(
            f"the statement holds a lone surrogate {code}, which is not valid Unicode text",
            sql=shown,
            offset=exc.start,
        ) from None
    for pattern, what in _LONG_TEXT:
        found = pattern.search(text)
        if found:
            # No excerpt: its line would hold the whole overlong text.
            raise ParseError(f"{what}, at character {found.start() + 1}")


def char_offsets(text: str, byte_offsets: list[int]) -> list[int]:
    """The character offsets in ``text`` of the UTF-8 ``byte_offsets`` (ascending).

    DuckDB's tokenizer and statement splitter count bytes of the UTF-8 text;
    everything in matchsql (slices, error positions, carets) counts Python
    characters. Every DuckDB position goes through here, so that a ``'é'``
    or ``'日本'`` before a keyword cannot shift what follows it.
    """
    if text.isascii():
        return list(byte_offsets)
    data = text.encode("utf-8", "surrogatepass")
    out: list[int] = []
    last_byte = last_char = 0
    for offset in byte_offsets:
        if offset < last_byte:  # not ascending: count from the start again
            last_byte = last_char = 0
        last_char += len(data[last_byte:offset].decode("utf-8", "surrogatepass"))
        last_byte = offset
        out.append(last_char)
    return out
