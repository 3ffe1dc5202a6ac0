"""The snapshot format: data round-trips, and bytes that are not a snapshot of this
version are refused with an error that says what is wrong, without running anything."""

from __future__ import annotations

import datetime
import pickle
import struct
import zlib
from collections import deque
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest

from matchsql.engine.output import MatchRecord
from matchsql.runtime.cancel import Cancellation
from matchsql.saved_state import state_format
from matchsql.saved_state.state_format import SnapshotError

HEAD = struct.Struct("<8sHIQI")


def test_plain_values_round_trip_with_their_shared_references():
    shared = [1, 2]
    batch = pa.record_batch({"a": [1, None, 3], "s": ["x", "y", None]})
    state = {
        (): [None, True, 3, -0.5, 2**80, "é", b"\x00\x80", bytearray(b"ab"), complex(1, 2)],
        ("k", 1): (shared, shared, {1, 2}, frozenset({"a"}), deque([1, 2], maxlen=5)),
        "arrays": [
            np.arange(6, dtype=np.int32).reshape(2, 3),
            np.zeros(0, bool),
            np.float64(2.5),
            np.array(["2024-01-01"], "datetime64[us]"),
        ],
        "arrow": [
            batch,
            pa.Table.from_batches([batch]),
            batch.schema,
            batch.schema.field(1),
            pa.int16(),
            pa.array([1.5, None]),
            pa.chunked_array([[1], [2, 3]]),
        ],
        "values": [
            Decimal("12.340"),
            datetime.date(2024, 2, 29),
            datetime.datetime(2024, 1, 1, 12, 30, 1, 5),
            datetime.timedelta(seconds=3),
            datetime.time(1, 2, 3),
        ],
    }
    back = state_format.loads(state_format.dumps(state))
    assert back[()][:8] == state[()][:8] and back[()][8] == complex(1, 2)
    first, second, *rest = back[("k", 1)]
    assert first is second and first == shared  # one list, as in the state
    assert rest == [{1, 2}, frozenset({"a"}), deque([1, 2], maxlen=5)]
    assert rest[2].maxlen == 5
    for got, want in zip(back["arrays"], state["arrays"]):
        assert type(got) is type(want) and got.dtype == want.dtype
        assert np.array_equal(got, want)
    assert back["arrays"][0].flags.writeable
    for got, want in zip(back["arrow"], state["arrow"]):
        assert type(got) is type(want) and got.equals(want)
    assert back["values"] == state["values"]


def test_declared_classes_round_trip_and_tokens_are_fresh():
    token = Cancellation()
    token.cancel()
    record = MatchRecord(4, ["A", "B"], [False, True], 3)
    back = state_format.loads(state_format.dumps({"token": token, "record": record}))
    assert type(back["token"]) is Cancellation and not back["token"].cancelled
    assert back["record"] == record and back["record"] is not record


def test_plan_objects_are_written_as_paths():
    plan_object = object()
    blob = state_format.dumps(
        [plan_object, 1], lambda obj: ("spec", 2) if obj is plan_object else None
    )
    assert state_format.loads(blob, {("spec", 2): "resolved"}.__getitem__) == ["resolved", 1]
    with pytest.raises(SnapshotError, match="refers to a plan object"):
        state_format.loads(blob)


@pytest.mark.parametrize("value", [object(), lambda: 1, np.array([None], object), print, type])
def test_what_is_not_data_is_not_written(value):
    with pytest.raises(SnapshotError, match="snapshot"):
        state_format.dumps({"x": value})


def reseal(tree: bytes, buffers: list[bytes] = ()) -> bytes:
    body = tree + b"".join(struct.pack("<Q", len(b)) + b for b in buffers)
    return HEAD.pack(b"MSQLSNAP", 1, zlib.crc32(body), len(tree), len(buffers)) + body


class _Payload:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return open, (self.path, "w")


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (b"", "not a matchsql snapshot"),
        (b"MSQLSNAP\x01", "not a matchsql snapshot"),
        (b"PAR1" + b"\x00" * 40, "not a matchsql snapshot"),
        (reseal(b"[1]")[:-1], "truncated or damaged"),
        (reseal(b"[1]").replace(b"[1]", b"[2]"), "truncated or damaged"),
        (HEAD.pack(b"MSQLSNAP", 2, 0, 0, 0), "format version 2; this matchsql reads version 1"),
        (reseal(b"[1"), "not valid JSON"),
        (
            reseal(b'{"object":"os.system","id":0,"state":["echo"]}'),
            "'os.system', which is not a matcher state class",
        ),
        (reseal(b'{"fresh":"subprocess.Popen","id":0}'), "not a matcher state class"),
        (
            reseal(
                b'{"method":"__init__","self":{"fresh":"matchsql.runtime.cancel.Cancellation","id":0}}'
            ),
            "not a method of a matcher state class",
        ),
        (reseal(b'{"ndarray":"O","shape":[1],"data":0,"id":0}', [b"\x00" * 8]), "dtype 'O'"),
        (
            reseal(b'{"ndarray":"<i8","shape":[2],"data":0,"id":0}', [b"\x00" * 8]),
            "does not fit its 8 bytes",
        ),
        (reseal(b'{"bytes":3}'), "buffer 3 it does not hold"),
        (reseal(b'{"ref":7}'), "refers to object 7 before it is defined"),
        (reseal(b'{"list":[],"id":0,"x":1}' + b"x"), "not valid JSON"),
        (reseal(b'{"arrow":"table","data":0,"id":0}', [b"junk"]), "damaged Arrow data"),
        (reseal(b"[" * 100000 + b"]" * 100000), "snapshot"),
    ],
)
def test_bytes_that_are_no_snapshot_are_refused(blob, message):
    with pytest.raises(SnapshotError, match=message.replace("(", r"\(")):
        state_format.loads(blob)


def test_a_pickle_is_refused_unread(tmp_path):
    marker = tmp_path / "made"
    blob = pickle.dumps(_Payload(str(marker)))
    with pytest.raises(SnapshotError, match="is a Python pickle, which matchsql never loads"):
        state_format.loads(blob)
    assert not marker.exists()
