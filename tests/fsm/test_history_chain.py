"""Key components that hold all rows of a set (vm.Chain) compare by content."""

from __future__ import annotations

from matchsql.engine.vm import Chain, HistoryKey
from matchsql.expr.history import HistoryUse


def chain(*entries: object) -> Chain | None:
    out: Chain | None = None
    for entry in entries:
        out = Chain(out, entry)
    return out


def test_chains_built_apart_are_equal_by_content() -> None:
    assert chain(1, 4, 7) == chain(1, 4, 7)
    assert hash(chain(1, 4, 7)) == hash(chain(1, 4, 7))
    assert chain(1, 4, 7) != chain(1, 5, 7)
    assert chain(1, 4) != chain(1, 4, 7)
    assert chain(4, 7) != chain(1, 4, 7)
    assert chain(1) != (1,)


def test_chains_sharing_a_tail_compare_without_walking_it() -> None:
    tail = chain(*range(100_000))  # a walk this long per comparison would show
    for k in range(1_000):
        assert Chain(tail, ("B", k)) == Chain(tail, ("B", k))
        assert Chain(tail, k) != Chain(tail, k + 1)


def test_every_component_separates_histories_by_their_rows_of_the_set() -> None:
    key = HistoryKey(HistoryUse(every={frozenset({"A"})}))
    one = key.advance(key.advance(key.initial, 0, "A"), 1, "B")
    two = key.advance(key.advance(key.initial, 0, "B"), 1, "A")
    same = key.advance(key.advance(key.initial, 0, "A"), 1, "C")
    assert one != two
    assert one == same and hash(one) == hash(same)
    assert key.initial == key.advance(key.initial, 3, "B")
