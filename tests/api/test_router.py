"""The partition router cuts sorted batches at key changes, across batch boundaries too."""

import numpy as np
import pyarrow as pa

from matchsql.execution.router.partitions import SortedPartitionRouter, segments


class RecordingRun:
    """A run that echoes what it was fed, tagged with its key, and notes when it finished."""

    def __init__(self, key, log):
        self.key = key
        self.log = log

    def feed(self, batch):
        self.log.append(("feed", self.key, batch.column("v").to_pylist()))
        return [batch]

    def finish(self):
        self.log.append(("finish", self.key))
        return []


def route_all(keys, batches):
    log = []
    router = SortedPartitionRouter(keys, lambda key: RecordingRun(key, log))
    out = []
    for batch in batches:
        out.extend(router.route(batch))
    out.extend(router.finish())
    return log, out, router


def batch(k, v):
    return pa.RecordBatch.from_pydict({"k": pa.array(k, pa.int64()), "v": pa.array(v, pa.int64())})


def test_no_keys_is_one_partition_across_batches():
    log, out, router = route_all([], [batch([1, 2], [1, 2]), batch([3], [3])])
    assert log == [("feed", (), [1, 2]), ("feed", (), [3]), ("finish", ())]
    assert router.partitions == 1
    assert sum(b.num_rows for b in out) == 3


def test_key_changes_within_and_across_batches():
    log, _, router = route_all(["k"], [batch([1, 1, 2], [10, 11, 20]), batch([2, 3], [21, 30])])
    assert log == [
        ("feed", (1,), [10, 11]),
        ("finish", (1,)),
        ("feed", (2,), [20]),
        ("feed", (2,), [21]),
        ("finish", (2,)),
        ("feed", (3,), [30]),
        ("finish", (3,)),
    ]
    assert router.partitions == 3


def test_null_keys_form_one_partition():
    log, _, router = route_all(["k"], [batch([None, None, 1], [1, 2, 3])])
    assert log[0] == ("feed", (None,), [1, 2])
    assert router.partitions == 2


def test_empty_batches_are_ignored():
    log, out, router = route_all(["k"], [batch([], []), batch([5], [1]), batch([], [])])
    assert log == [("feed", (5,), [1]), ("finish", (5,))]
    assert router.partitions == 1


def test_two_key_columns():
    rb = pa.RecordBatch.from_pydict(
        {"k": [1, 1, 1, 2], "j": ["a", "a", "b", "b"], "v": [1, 2, 3, 4]}
    )
    log = []
    router = SortedPartitionRouter(["k", "j"], lambda key: RecordingRun(key, log))
    list(router.route(rb))
    list(router.finish())
    feeds = [entry[1:] for entry in log if entry[0] == "feed"]
    assert feeds == [((1, "a"), [1, 2]), ((1, "b"), [3]), ((2, "b"), [4])]


def test_segments_of_one_key_and_of_keys_equal_only_at_the_ends():
    # A sorted batch whose first and last keys agree is one range; one whose ends
    # differ in the second key only is cut wherever a key changes.
    rb = pa.RecordBatch.from_pydict({"k": [None, None, None], "j": ["a", "a", "a"]})
    assert segments(rb, ["k", "j"]) == [(0, 3)]
    rb = pa.RecordBatch.from_pydict({"k": [7, 7, 7, 7], "j": ["a", "a", "b", "c"]})
    assert segments(rb, ["k", "j"]) == [(0, 2), (2, 3), (3, 4)]
    assert segments(rb, ["k"]) == [(0, 4)]


def route_whole(batches):
    """The sorted router with a ``whole`` that records the partitions it was given."""
    log, wholes = [], []

    def whole(rows, bounds):
        v = rows.column("v").to_pylist()
        wholes.append([v[a:b] for a, b in zip(bounds[:-1], bounds[1:])])
        return [rows], np.diff(bounds)

    router = SortedPartitionRouter(["k"], lambda key: RecordingRun(key, log), whole)
    out = []
    for b in batches:
        out.extend(router.route(b))
    out.extend(router.finish())
    return log, wholes, out, router


def test_whole_batches_cut_at_partition_ends_need_no_run():
    """A batch's last partition waits for the next batch: where that starts another key,
    the partition was complete and is matched with the rest of its batch."""
    log, wholes, out, router = route_whole(
        [batch([1, 1, 2], [10, 11, 20]), batch([3, 4, 4], [30, 40, 41])]
    )
    assert log == []
    assert wholes == [[[10, 11], [20]], [[30], [40, 41]]]
    assert [v for b in out for v in b.column("v").to_pylist()] == [10, 11, 20, 30, 40, 41]
    assert router.partitions == 4


def test_a_partition_going_on_in_the_next_batch_gets_a_run():
    log, wholes, out, router = route_whole(
        [batch([1, 2, 2], [10, 20, 21]), batch([2], [22]), batch([2, 3], [23, 30])]
    )
    assert wholes == [[[10]], [[30]]]
    assert log == [
        ("feed", (2,), [20, 21]),
        ("feed", (2,), [22]),
        ("feed", (2,), [23]),
        ("finish", (2,)),
    ]
    assert [v for b in out for v in b.column("v").to_pylist()] == [10, 20, 21, 22, 23, 30]
    assert router.partitions == 3
