"""DuckDB is the oracle for every function inside a pattern query.

Each expression below applies one of DuckDB's scalar functions (from its
``duckdb_functions()`` catalog) to columns of a small table of event-shaped
rows: three partitions of uneven length, NULLs, non-ASCII text, JSON, lists,
structs and maps. The expression runs inside MATCH_RECOGNIZE four ways and
must give exactly DuckDB's own value on the same rows:

* in MEASURES over the current row (ALL ROWS PER MATCH, RUNNING);
* in MEASURES over a navigated row (``PREV``), against DuckDB's ``LAG``;
* in MEASURES over final aggregates of the match, against ``GROUP BY``;
* in DEFINE, where it decides which variable each row maps to.
"""

from __future__ import annotations

import math
import re

import duckdb
import pytest

import matchsql

ROWS = """
CREATE TABLE ev AS SELECT * FROM (VALUES
 (1, 1, 'alpha',  'Zoë',   1.5::DOUBLE, 3,    DATE '2024-01-31', TIMESTAMP '2024-01-31 10:15:00',
  '{"a": 1, "b": "x"}',  [1, 2, 3],    {'a': 1, 'b': 'p'},    MAP {'k': 1}),
 (1, 2, 'Beta',   '日本',  -2.25,       7,    DATE '2024-02-29', TIMESTAMP '2024-02-29 23:59:59',
  '{"a": 2, "b": "yé"}', [4],          {'a': 2, 'b': 'q'},    MAP {'k': 2, 'j': 3}),
 (1, 3, NULL,     'ñandú', 0.0,         NULL, NULL,              TIMESTAMP '2024-03-01 00:00:00',
  NULL,                  NULL,         NULL,                  NULL),
 (1, 4, 'gamma',  '😀 ok', 10.0,        -4,   DATE '2023-12-25', NULL,
  '{"a": 3}',            [],           {'a': NULL, 'b': 'r'}, MAP {'k': 4}),
 (2, 1, 'delta',  'Ωmega', NULL,        0,    DATE '2020-02-29', TIMESTAMP '2020-02-29 12:00:00',
  '{"b": "z"}',          [NULL, 5],    {'a': 5, 'b': NULL},   MAP {'z': 0}),
 (2, 2, 'x,y,z',  'école', 3.75,        12,   DATE '2000-01-01', TIMESTAMP '2000-01-01 00:00:01',
  '{"a": 10, "b": "w"}', [6, 7, 8, 9], {'a': 6, 'b': 's'},    MAP {'k': 9}),
 (3, 1, '  pad ', 'ß',     99.5,        1,    DATE '1999-12-31', TIMESTAMP '1999-12-31 23:00:00',
  '{"a": -1}',           [10],         {'a': 7, 'b': 't'},    MAP {'k': 1})
) v(p, ts, s, n, x, i, d, t, js, l, st, m)
"""

#: (DuckDB function name, expression over {column} placeholders).
FUNCTIONS: list[tuple[str, str]] = [
    # strings
    ("lower", "lower({s})"),
    ("upper", "upper({n})"),
    ("length", "length({n})"),
    ("strlen", "strlen({n})"),
    ("reverse", "reverse({n})"),
    ("trim", "trim({s})"),
    ("ltrim", "ltrim({s})"),
    ("rtrim", "rtrim({s})"),
    ("lpad", "lpad({s}, 8, '*')"),
    ("rpad", "rpad({n}, 8, '.')"),
    ("repeat", "repeat({s}, 2)"),
    ("replace", "replace({s}, 'a', 'A')"),
    ("substring", "substring({n}, 2, 3)"),
    ("left", "left({n}, 2)"),
    ("right", "right({s}, 3)"),
    ("concat", "concat({s}, '-', {n})"),
    ("concat_ws", "concat_ws('/', {s}, {n})"),
    ("contains", "contains({s}, 'a')"),
    ("starts_with", "starts_with({s}, 'a')"),
    ("ends_with", "ends_with({s}, 'a')"),
    ("instr", "instr({s}, 'a')"),
    ("position", "position('a' IN {s})"),
    ("strpos", "strpos({n}, 'o')"),
    ("ascii", "ascii({s})"),
    ("unicode", "unicode({n})"),
    ("chr", "chr(65 + abs({i}))"),
    ("ucase", "ucase({s})"),
    ("lcase", "lcase({n})"),
    ("split_part", "split_part({s}, ',', 2)"),
    ("string_split", "string_split({s}, ',')"),
    ("str_split", "str_split({s}, ',')[1]"),
    ("array_to_string", "array_to_string(string_split({s}, 'a'), '+')"),
    ("format", "format('{{}}:{{}}', {s}, {i})"),
    ("printf", "printf('%s=%d', {s}, {i})"),
    ("levenshtein", "levenshtein({s}, 'alpha')"),
    ("damerau_levenshtein", "damerau_levenshtein({s}, 'beta')"),
    ("hamming", "hamming(lpad({s}, 5, 'x')[1:5], 'alpha')"),
    ("jaccard", "jaccard({s}, 'alpha')"),
    ("jaro_similarity", "jaro_similarity({s}, 'alpha')"),
    ("jaro_winkler_similarity", "jaro_winkler_similarity({s}, 'gamma')"),
    ("mismatches", "mismatches(lpad({s}, 5, 'x')[1:5], 'gamma')"),
    ("like_escape", "like_escape({s}, 'a%', '!')"),
    ("prefix", "prefix({s}, 'al')"),
    ("suffix", "suffix({s}, 'ta')"),
    ("translate", "translate({s}, 'ae', 'AE')"),
    ("bit_length", "bit_length({n})"),
    ("octet_length", "octet_length(encode({n}))"),
    ("encode", "encode({n})"),
    ("decode", "decode(encode({n}))"),
    ("to_base64", "to_base64(encode({s}))"),
    ("from_base64", "from_base64(to_base64(encode({s})))"),
    ("url_encode", "url_encode({n})"),
    ("url_decode", "url_decode(url_encode({n}))"),
    ("strip_accents", "strip_accents({n})"),
    ("nfc_normalize", "nfc_normalize({n})"),
    ("ord", "ord({n})"),
    ("formatReadableSize", "formatReadableSize(abs({i}) * 1000)"),
    ("format_bytes", "format_bytes(abs({i}) * 100000)"),
    ("bar", "bar({x}, -10, 100, 10)"),
    ("string_agg", None),  # an aggregate: in the aggregate tests
    # regular expressions
    ("regexp_matches", "regexp_matches({s}, '^[a-c]')"),
    ("regexp_replace", "regexp_replace({s}, '[aeiou]', '_', 'g')"),
    ("regexp_extract", "regexp_extract({s}, '([a-z])([a-z])', 2)"),
    ("regexp_extract_all", "regexp_extract_all({s}, '[a-z]')"),
    ("regexp_full_match", "regexp_full_match({s}, '[a-z]+')"),
    ("regexp_split_to_array", "regexp_split_to_array({s}, '[,e]')"),
    ("regexp_escape", "regexp_escape({s})"),
    # hashing
    ("md5", "md5({s})"),
    ("sha1", "sha1({n})"),
    ("sha256", "sha256({s})"),
    ("hash", "hash({s}, {i})"),
    ("md5_number", "md5_number({s})"),
    # math
    ("abs", "abs({x})"),
    ("ceil", "ceil({x})"),
    ("ceiling", "ceiling({x})"),
    ("floor", "floor({x})"),
    ("round", "round({x}, 1)"),
    ("trunc", "trunc({x})"),
    ("sign", "sign({x})"),
    ("sqrt", "sqrt(abs({x}))"),
    ("cbrt", "cbrt({x})"),
    ("exp", "exp({x} / 10)"),
    ("ln", "ln(abs({x}) + 1)"),
    ("log", "log(abs({x}) + 1)"),
    ("log2", "log2(abs({x}) + 1)"),
    ("log10", "log10(abs({x}) + 1)"),
    ("pow", "pow({x}, 2)"),
    ("power", "power(2, {i})"),
    ("sin", "sin({x})"),
    ("cos", "cos({x})"),
    ("tan", "tan({x})"),
    ("asin", "asin({x} / 100)"),
    ("acos", "acos({x} / 100)"),
    ("atan", "atan({x})"),
    ("atan2", "atan2({x}, {i})"),
    ("degrees", "degrees({x})"),
    ("radians", "radians({x})"),
    ("greatest", "greatest({x}, {i})"),
    ("least", "least({x}, {i})"),
    ("gcd", "gcd({i}, 12)"),
    ("lcm", "lcm({i}, 4)"),
    ("factorial", "factorial(abs({i}) % 10)"),
    ("even", "even({x})"),
    ("isnan", "isnan({x})"),
    ("isinf", "isinf({x})"),
    ("isfinite", "isfinite({x})"),
    ("bit_count", "bit_count({i})"),
    ("xor", "xor({i}, 5)"),
    ("signbit", "signbit({x})"),
    ("round_even", "round_even({x}, 0)"),
    ("gamma", "gamma(abs({x}) / 10 + 1)"),
    ("lgamma", "lgamma(abs({x}) + 1)"),
    ("nextafter", "nextafter({x}, 0)"),
    ("divide", "divide({i}, 3)"),
    ("fdiv", "fdiv({x}, 2)"),
    ("fmod", "fmod({x}, 3)"),
    ("to_hex", "to_hex({i})"),
    ("bin", "bin(abs({i}))"),
    # dates and times
    ("year", "year({d})"),
    ("month", "month({d})"),
    ("day", "day({d})"),
    ("dayname", "dayname({d})"),
    ("monthname", "monthname({d})"),
    ("dayofweek", "dayofweek({d})"),
    ("dayofyear", "dayofyear({d})"),
    ("week", "week({d})"),
    ("quarter", "quarter({d})"),
    ("isodow", "isodow({d})"),
    ("yearweek", "yearweek({d})"),
    ("last_day", "last_day({d})"),
    ("date_part", "date_part('month', {t})"),
    ("datepart", "datepart('hour', {t})"),
    ("date_trunc", "date_trunc('month', {t})"),
    ("datetrunc", "datetrunc('day', {t})"),
    ("date_diff", "date_diff('day', {d}, DATE '2024-01-01')"),
    ("datediff", "datediff('month', {d}, DATE '2024-06-01')"),
    ("date_sub", "date_sub('day', {d}, DATE '2024-01-01')"),
    ("date_add", "date_add({d}, INTERVAL 3 DAY)"),
    ("strftime", "strftime({t}, '%Y/%m/%d %H:%M')"),
    ("strptime", "strptime(strftime({t}, '%d.%m.%Y'), '%d.%m.%Y')"),
    ("epoch", "epoch({t})"),
    ("epoch_ms", "epoch_ms({t})"),
    ("epoch_us", "epoch_us({t})"),
    ("to_timestamp", "to_timestamp({i} * 86400)"),
    ("make_date", "make_date(2024, abs({i}) % 12 + 1, 1)"),
    ("make_timestamp", "make_timestamp(2024, 1, 1, abs({i}) % 24, 0, 0)"),
    ("hour", "hour({t})"),
    ("minute", "minute({t})"),
    ("second", "second({t})"),
    ("millisecond", "millisecond({t})"),
    ("era", "era({d})"),
    ("century", "century({d})"),
    ("decade", "decade({d})"),
    ("isoyear", "isoyear({d})"),
    ("weekday", "weekday({d})"),
    ("weekofyear", "weekofyear({d})"),
    ("julian", "julian({d})"),
    ("time_bucket", "time_bucket(INTERVAL 6 HOUR, {t})"),
    ("age", "age(TIMESTAMP '2025-01-01 00:00:00', {t})"),
    ("to_days", "to_days({i})"),
    ("to_hours", "to_hours({i})"),
    ("to_minutes", "to_minutes({i})"),
    # lists
    ("list_sum", "list_sum({l})"),
    ("list_max", "list_max({l})"),
    ("list_min", "list_min({l})"),
    ("list_avg", "list_avg({l})"),
    ("list_count", "list_count({l})"),
    ("len", "len({l})"),
    ("array_length", "array_length({l})"),
    ("list_contains", "list_contains({l}, 4)"),
    ("list_has", "list_has({l}, 5)"),
    ("list_position", "list_position({l}, 7)"),
    ("list_extract", "list_extract({l}, 2)"),
    ("list_element", "list_element({l}, 1)"),
    ("list_slice", "list_slice({l}, 2, 3)"),
    ("list_sort", "list_sort({l})"),
    ("list_reverse_sort", "list_reverse_sort({l})"),
    ("list_distinct", "list_distinct({l})"),
    ("list_unique", "list_unique({l})"),
    ("list_concat", "list_concat({l}, [0])"),
    ("list_append", "list_append({l}, 1)"),
    ("list_prepend", "list_prepend(1, {l})"),
    ("list_reverse", "list_reverse({l})"),
    ("flatten", "flatten([{l}, [1]])"),
    ("list_transform", "list_transform({l}, e -> e * 2)"),
    ("list_filter", "list_filter({l}, e -> e > 3)"),
    ("list_reduce", "list_reduce(list_append({l}, 0), (a, b) -> a + b)"),
    ("list_aggregate", "list_aggregate({l}, 'max')"),
    ("list_value", "list_value({i}, 1)"),
    ("list_zip", "list_zip({l}, [1, 2])"),
    ("array_has_any", "array_has_any({l}, [1, 6])"),
    ("list_has_all", "list_has_all({l}, [4])"),
    ("list_intersect", "list_intersect({l}, [1, 4, 6])"),
    ("list_resize", "list_resize({l}, 2)"),
    ("unnest", None),
    # structs and maps
    ("struct_extract", "struct_extract({st}, 'b')"),
    ("struct_pack", "struct_pack(k := {i}, v := {s})"),
    ("row", "row({i}, {s})"),
    ("struct_insert", "struct_insert({st}, c := 1)"),
    ("map_keys", "map_keys({m})"),
    ("map_values", "map_values({m})"),
    ("map_extract", "map_extract({m}, 'k')"),
    ("cardinality", "cardinality({m})"),
    ("map_contains", "map_contains({m}, 'j')"),
    ("map_entries", "map_entries({m})"),
    ("map_from_entries", "map_from_entries([('a', {i})])"),
    # JSON
    ("json_extract", "json_extract({js}, '$.a')"),
    ("json_extract_string", "json_extract_string({js}, '$.b')"),
    ("json_valid", "json_valid({js})"),
    ("json_type", "json_type({js}, '$.a')"),
    ("json_keys", "json_keys({js})"),
    ("json_array_length", "json_array_length(json_array({i}, 2))"),
    ("json_object", "json_object('s', {s})"),
    ("to_json", "to_json({st})"),
    ("json_exists", "json_exists({js}, '$.b')"),
    ("json_value", "json_value({js}, '$.a')"),
    ("json_contains", "json_contains({js}, '1')"),
    ("json_structure", "json_structure({js})"),
    # conditionals, casts and others
    ("coalesce", "coalesce({s}, 'none')"),
    ("ifnull", "ifnull({x}, -1)"),
    ("nullif", "nullif({i}, 0)"),
    ("typeof", "typeof({st})"),
    ("if", "if({x} > 0, 'pos', 'neg')"),
    ("try_cast", "TRY_CAST({s} AS INTEGER)"),
    ("to_binary", "to_binary({i})"),
    ("format_type", None),
    ("uuid", None),
    ("array_value", "array_value({i}, 2)"),
    ("error", None),
    ("greatest_common_divisor", "greatest_common_divisor({i}, 6)"),
    ("least_common_multiple", "least_common_multiple({i}, 3)"),
    ("current_date", None),
    ("enum_range", None),
    ("constant_or_null", "constant_or_null(1, {i})"),
    ("stats", None),
    ("vector_type", None),
    ("alias", None),
    ("string_to_array", "string_to_array({s}, ',')"),
]

CASES = [(name, expr) for name, expr in FUNCTIONS if expr is not None]
#: The cases over scalar columns (the engine's own max/min compare no lists or structs).
SCALAR_CASES = [(n, e) for n, e in CASES if not any("{" + c + "}" in e for c in ("l", "st", "m"))]
COLUMNS = ("s", "n", "x", "i", "d", "t", "js", "l", "st", "m")
#: An aggregate per column type whose value the template's function accepts.
FINAL_AGGREGATES = {
    "s": "max",
    "n": "min",
    "x": "max",
    "i": "min",
    "d": "max",
    "t": "min",
    "js": "max",
    "l": "max",
    "st": "min",
    "m": "any_value",
}


def _fill(template: str, read) -> str:
    return template.format(**{c: read(c) for c in COLUMNS})


def _norm(table) -> list[tuple]:
    """The rows of an Arrow ``table`` as Python values (both sides convert alike), NaN as
    a string so that equal rows compare equal."""

    def value(v):
        return "NaN" if isinstance(v, float) and math.isnan(v) else v

    return [tuple(value(v) for v in row.values()) for row in table.to_pylist()]


@pytest.fixture(scope="module")
def engines():
    con = matchsql.connect(demo=False)
    con.sql(ROWS)
    ref = duckdb.connect()
    ref.execute("SET lambda_syntax = 'ENABLE_SINGLE_ARROW'")
    ref.execute(ROWS)
    yield con, ref
    con.close()
    ref.close()


def test_the_functions_are_duckdbs_own():
    """At least 150 distinct scalar functions of DuckDB's catalog are exercised."""
    ref = duckdb.connect()
    known = {
        name.lower()
        for (name,) in ref.sql("SELECT DISTINCT function_name FROM duckdb_functions()").fetchall()
    }
    named = {name.lower() for name, _ in CASES}
    forms = {"if", "try_cast", "position", "coalesce", "ifnull"}  # SQL forms, not catalog rows
    assert named - forms <= known, named - forms - known
    assert len(named & known) >= 150


@pytest.mark.parametrize(("name", "template"), CASES, ids=[n for n, _ in CASES])
def test_current_row(engines, name, template):
    con, ref = engines
    got = con.sql(
        "SELECT p, ts, v FROM ev MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts "
        f"MEASURES {_fill(template, lambda c: c)} AS v ALL ROWS PER MATCH "
        "PATTERN (A+) DEFINE A AS true) ORDER BY p, ts"
    ).arrow()
    want = ref.sql(
        f"SELECT p, ts, {_fill(template, lambda c: c)} FROM ev ORDER BY p, ts"
    ).to_arrow_table()
    assert _norm(got) == _norm(want)


@pytest.mark.parametrize(("name", "template"), CASES, ids=[n for n, _ in CASES])
def test_navigated_row(engines, name, template):
    con, ref = engines
    got = con.sql(
        "SELECT p, ts, v FROM ev MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts "
        f"MEASURES {_fill(template, lambda c: f'PREV(A.{c})')} AS v ALL ROWS PER MATCH "
        "PATTERN (A+) DEFINE A AS true) ORDER BY p, ts"
    ).arrow()
    want = ref.sql(
        f"SELECT p, ts, {_fill(template, lambda c: f'lag({c}) OVER w')} FROM ev "
        "WINDOW w AS (PARTITION BY p ORDER BY ts) ORDER BY p, ts"
    ).to_arrow_table()
    assert _norm(got) == _norm(want)


@pytest.mark.parametrize(("name", "template"), SCALAR_CASES, ids=[n for n, _ in SCALAR_CASES])
def test_final_aggregates(engines, name, template):
    con, ref = engines
    agg = {c: f"{FINAL_AGGREGATES[c]}({{}}{c})" for c in COLUMNS}
    got = con.sql(
        "SELECT p, v FROM ev MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES "
        f"{_fill(template, lambda c: 'FINAL ' + agg[c].format('A.'))} AS v ONE ROW PER MATCH "
        "PATTERN (A+) DEFINE A AS true) ORDER BY p"
    ).arrow()
    want = ref.sql(
        f"SELECT p, {_fill(template, lambda c: agg[c].format(''))} FROM ev GROUP BY p ORDER BY p"
    ).to_arrow_table()
    assert _norm(got) == _norm(want)


@pytest.mark.parametrize(("name", "template"), CASES, ids=[n for n, _ in CASES])
def test_define(engines, name, template):
    """The function decides the label: B where the hash of its value is even, else C."""
    con, ref = engines
    test = f"hash({_fill(template, lambda c: 'B.' + c)}) % 2 = 0"
    got = con.sql(
        "SELECT p, ts, cls FROM ev MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts "
        "MEASURES CLASSIFIER() AS cls ALL ROWS PER MATCH PATTERN (B | C) "
        f"DEFINE B AS {test}) ORDER BY p, ts"
    ).arrow()
    plain = re.sub(r"\bB\.", "", test)
    want = ref.sql(
        f"SELECT p, ts, CASE WHEN {plain} THEN 'B' ELSE 'C' END FROM ev ORDER BY p, ts"
    ).to_arrow_table()
    assert _norm(got) == _norm(want)


#: Expressions that read no column: DuckDB computes them at each row, as in a SELECT
#: (a cast to a type no SQL literal spells, a function of constants).
CONSTANTS = [
    "CAST('0b5f2d54-3b71-4fb9-9a0b-2f1f1a1d7a3e' AS UUID)",
    "typeof(1)",
    "md5('ß')",
    "CAST('x' AS BLOB)",
    "CAST('[1, 2]' AS INTEGER[])",
    "{'a': 1, 'b': 'é'}",
    "date_trunc('month', TIMESTAMP '2024-02-29 10:00:00')",
    "INTERVAL 3 DAY",
    "CAST(1.25 AS DECIMAL(9, 3))",
    "strftime(DATE '2024-01-31', '%A')",
]


@pytest.mark.parametrize("constant", CONSTANTS)
def test_constants_in_measures_and_define(engines, constant):
    con, ref = engines
    got = con.sql(
        "SELECT p, ts, v, cls FROM ev MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts "
        f"MEASURES {constant} AS v, CLASSIFIER() AS cls ALL ROWS PER MATCH "
        f"PATTERN (B | C) DEFINE B AS hash({constant}) % 2 = 0 AND ts % 2 = 1) "
        "ORDER BY p, ts"
    ).arrow()
    want = ref.sql(
        f"SELECT p, ts, {constant}, CASE WHEN hash({constant}) % 2 = 0 "
        "AND ts % 2 = 1 THEN 'B' ELSE 'C' END FROM ev ORDER BY p, ts"
    ).to_arrow_table()
    assert got.schema.field("v").type == want.schema.field(2).type
    assert _norm(got) == _norm(want)


def test_volatile_functions_run_at_each_row(engines):
    """``uuid()`` has a new value at every row, as in DuckDB's SELECT; in DEFINE too
    (``random() < 2`` holds at every row)."""
    con, _ = engines
    rows = con.sql(
        "SELECT u, k FROM ev MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts "
        "MEASURES uuid() AS u, COUNT(*) AS k ALL ROWS PER MATCH "
        "PATTERN (A+) DEFINE A AS random() < 2)"
    ).fetchall()
    assert len(rows) == 7
    assert len({u for u, _ in rows}) == 7


def test_unmatched_rows_have_null_measures(engines):
    """WITH UNMATCHED ROWS: every measure of an unmatched row is NULL, also where
    DuckDB's SQL around the match's values would turn NULLs into a value (``coalesce``,
    a constant). Rows of ``p = 1``: x = 1.5, -2.25, 0.0, 10.0; A matches x > 1."""
    con, _ = engines
    rows = con.sql(
        "SELECT ts, c, k, z FROM ev MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts "
        "MEASURES coalesce(FIRST(A.x), -1) AS c, typeof(1) AS k, 'z' AS z "
        "ALL ROWS PER MATCH WITH UNMATCHED ROWS PATTERN (A) DEFINE A AS x > 1) "
        "WHERE p = 1 ORDER BY ts"
    ).fetchall()
    assert rows == [
        (1, 1.5, "INTEGER", "z"),
        (2, None, None, None),
        (3, None, None, None),
        (4, 10.0, "INTEGER", "z"),
    ]
