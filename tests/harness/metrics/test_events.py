"""The strict event-file reader: every scalar, CRC checks, byte offsets of damage."""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tensorboard.compat.proto import event_pb2, summary_pb2, types_pb2

from harness.metrics.events import EventFileError, _decode_event_proto, iter_records, read_scalars
from tests.harness.metrics.event_files import (
    frame,
    scalar_event,
    tensor_event,
    write_event_file,
    write_scalars,
)


def test_read_scalars_returns_every_value_in_file_order(tmp_path) -> None:
    values = [float(i) for i in range(5000)]  # far above tensorboard's reservoir size of 1000
    path = write_scalars(tmp_path, {"Perf/total_fps": values, "Loss/critic": values[:10]})
    scalars = read_scalars(path)
    assert [e.value for e in scalars["Perf/total_fps"]] == values
    assert [e.step for e in scalars["Loss/critic"]] == [i * 64 for i in range(10)]
    assert list(scalars) == ["Perf/total_fps", "Loss/critic"]


@pytest.mark.parametrize(
    ("dtype", "packed", "value"),
    [
        (types_pb2.DT_FLOAT, False, 1.5),
        (types_pb2.DT_DOUBLE, False, 2.25),
        (types_pb2.DT_DOUBLE, True, -3.5),
        (types_pb2.DT_FLOAT, True, 0.5),
    ],
    ids=["float_val", "double_val", "double_packed", "float_packed"],
)
def test_read_scalars_decodes_tensor_encoded_scalars(
    tmp_path, dtype: int, packed: bool, value: float
) -> None:
    path = write_event_file(
        tmp_path, [tensor_event(7, "Perf/total_fps", value, dtype=dtype, packed=packed)]
    )
    [event] = read_scalars(path)["Perf/total_fps"]
    assert (event.step, event.value) == (7, value)


def test_read_scalars_skips_non_scalar_values(tmp_path) -> None:
    histo = summary_pb2.Summary.Value(
        tag="Hist/x", histo=summary_pb2.HistogramProto(min=0.0, max=1.0)
    )
    payload = event_pb2.Event(
        step=1, summary=summary_pb2.Summary(value=[histo])
    ).SerializeToString()
    path = write_event_file(tmp_path, [payload, scalar_event(2, {"Loss/actor": 1.0})])
    assert list(read_scalars(path)) == ["Loss/actor"]


def test_read_scalars_keeps_non_finite_values_and_negative_steps(tmp_path) -> None:
    path = write_event_file(tmp_path, [scalar_event(-5, {"Loss/actor": float("nan")})])
    [event] = read_scalars(path)["Loss/actor"]
    assert event.step == -5 and math.isnan(event.value)


def test_reads_files_written_by_tensorboards_own_writer(tmp_path) -> None:
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(tmp_path))
    for step in range(3):
        writer.add_event(
            event_pb2.Event(
                step=step,
                wall_time=1.0,
                summary=summary_pb2.Summary(
                    value=[
                        summary_pb2.Summary.Value(tag="Perf/total_fps", simple_value=10.0 * step)
                    ]
                ),
            )
        )
    writer.close()
    [path] = tmp_path.glob("events.out.tfevents.*")
    assert [e.value for e in read_scalars(path)["Perf/total_fps"]] == [0.0, 10.0, 20.0]


def _two_record_file(tmp_path):
    path = write_event_file(
        tmp_path, [scalar_event(1, {"Loss/actor": 1.0}), scalar_event(2, {"Loss/actor": 2.0})]
    )
    offsets = [offset for offset, _ in iter_records(path)]
    return path, path.read_bytes(), offsets


def test_truncated_last_record_is_an_error_naming_its_offset(tmp_path) -> None:
    path, blob, offsets = _two_record_file(tmp_path)
    path.write_bytes(blob[:-3])
    with pytest.raises(EventFileError, match=rf"truncated record at byte offset {offsets[-1]}\b"):
        read_scalars(path)


def test_truncated_header_is_an_error_naming_its_offset(tmp_path) -> None:
    path, blob, _ = _two_record_file(tmp_path)
    path.write_bytes(blob + b"\x05\x00\x00")
    with pytest.raises(
        EventFileError, match=rf"truncated record header at byte offset {len(blob)}\b"
    ):
        read_scalars(path)


def test_corrupt_payload_crc_is_an_error_naming_its_offset(tmp_path) -> None:
    path, blob, offsets = _two_record_file(tmp_path)
    damaged = bytearray(blob)
    damaged[offsets[1] + 14] ^= 0xFF  # a payload byte of the second record
    path.write_bytes(bytes(damaged))
    with pytest.raises(
        EventFileError, match=rf"corrupt record data \(CRC mismatch\) at byte offset {offsets[1]}\b"
    ):
        read_scalars(path)


def test_corrupt_length_crc_is_an_error_naming_its_offset(tmp_path) -> None:
    path, blob, offsets = _two_record_file(tmp_path)
    damaged = bytearray(blob)
    damaged[offsets[2]] ^= 0x01  # the length field of the third record
    path.write_bytes(bytes(damaged))
    with pytest.raises(
        EventFileError,
        match=rf"corrupt record length \(CRC mismatch\) at byte offset {offsets[2]}\b",
    ):
        read_scalars(path)


def test_record_that_is_not_an_event_is_an_error_naming_its_offset(tmp_path) -> None:
    path = tmp_path / "events.out.tfevents.1.h"
    good = frame(scalar_event(1, {"Loss/actor": 1.0}))
    path.write_bytes(good + frame(b"\xff\xff\xff\xff"))
    with pytest.raises(
        EventFileError, match=rf"byte offset {len(good)} is not a TensorBoard Event"
    ):
        read_scalars(path)


tags = st.sampled_from(["Loss/actor", "Perf/total_fps", "reward/track", "ü/ß"])
value_lists = st.lists(
    st.dictionaries(tags, st.floats(allow_nan=False, width=32), min_size=1, max_size=3), max_size=20
)


@settings(max_examples=60, deadline=None)
@given(
    events=value_lists, steps=st.lists(st.integers(-(2**63), 2**63 - 1), min_size=20, max_size=20)
)
def test_fast_decoder_agrees_with_the_compiled_proto(tmp_path_factory, events, steps) -> None:
    run_dir = tmp_path_factory.mktemp("run")
    path = write_event_file(
        run_dir,
        [scalar_event(steps[i], values, wall_time=i + 0.5) for i, values in enumerate(events)],
    )
    reference: dict[str, list[tuple[int, float, float]]] = {}
    for offset, payload in iter_records(path):
        step, wall_time, items = _decode_event_proto(path, offset, payload)
        for tag, value in items:
            reference.setdefault(tag, []).append((step, wall_time, value))
    assert {tag: [tuple(e) for e in evs] for tag, evs in read_scalars(path).items()} == reference


def test_struct_layout_matches_tfrecord_framing(tmp_path) -> None:
    record = frame(b"abc")
    assert struct.unpack_from("<Q", record)[0] == 3 and len(record) == 3 + 16
