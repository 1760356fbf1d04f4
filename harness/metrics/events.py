"""A strict reader of TensorBoard event files (TFRecord framing + ``Event`` protos).

TensorBoard's own loaders sample scalars (a reservoir) and stop silently at a bad record;
``extract-metrics`` needs every scalar and must fail on a damaged file (docs/contracts.md §extract-metrics).
Each record is ``uint64 length | uint32 masked_crc32c(length) | data | uint32
masked_crc32c(data)`` (little endian); both checksums are verified and any short or corrupt
record raises :class:`EventFileError` naming the byte offset where the record starts.
Scalars come from ``simple_value`` and from rank-0 numeric tensors (TF2-style summaries).
Only tensorboard's compiled protos are imported, never torch or tensorflow.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import google_crc32c
from google.protobuf.message import DecodeError
from tensorboard.compat.proto import event_pb2, types_pb2

from contracts.errors import HarnessError

__all__ = ["EventFileError", "ScalarEvent", "iter_records", "masked_crc32c", "read_scalars"]

_F32 = struct.Struct("<f")
_F64 = struct.Struct("<d")
_MASK_DELTA = 0xA282EAD8
# numeric dtype -> (repeated field holding the values, struct format of tensor_content)
_TENSOR_DTYPES: dict[int, tuple[str, str]] = {
    types_pb2.DT_FLOAT: ("float_val", "<f"),
    types_pb2.DT_DOUBLE: ("double_val", "<d"),
    types_pb2.DT_INT32: ("int_val", "<i"),
    types_pb2.DT_INT64: ("int64_val", "<q"),
    types_pb2.DT_HALF: ("half_val", "<e"),
}


class EventFileError(HarnessError):
    """The event file is truncated or corrupt (the message names the byte offset)."""


class ScalarEvent(NamedTuple):
    """One scalar in file order: TensorBoard global step, wall time (epoch s), value."""

    step: int
    wall_time: float
    value: float


def masked_crc32c(data: bytes | memoryview) -> int:
    """TFRecord's masked CRC-32C of ``data``."""
    crc = google_crc32c.value(bytes(data))
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def iter_records(path: Path) -> Iterator[tuple[int, bytes]]:
    """Yield ``(offset, payload)`` for every record; raise EventFileError on damage.

    Raises:
        EventFileError: a short header, a length or data checksum mismatch, or a record
            that extends past the end of the file.
        OSError: the file cannot be read.
    """
    blob = Path(path).read_bytes()
    size = len(blob)
    offset = 0
    unpack_from, crc32c = struct.unpack_from, google_crc32c.value
    while offset < size:
        if size - offset < 12:
            raise EventFileError(
                f"{path}: truncated record header at byte offset {offset} ({size - offset} of 12 bytes present)"
            )
        length, length_crc = unpack_from("<QI", blob, offset)
        crc = crc32c(blob[offset : offset + 8])
        if (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF != length_crc:
            raise EventFileError(
                f"{path}: corrupt record length (CRC mismatch) at byte offset {offset}"
            )
        start = offset + 12
        end = start + length
        if end + 4 > size:
            raise EventFileError(
                f"{path}: truncated record at byte offset {offset} (needs {length + 16} bytes, {size - offset} present)"
            )
        payload = blob[start:end]
        crc = crc32c(payload)
        if (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF != unpack_from("<I", blob, end)[
            0
        ]:
            raise EventFileError(
                f"{path}: corrupt record data (CRC mismatch) at byte offset {offset}"
            )
        yield offset, payload
        offset = end + 4


def _tensor_scalar(tensor: Any) -> float | None:
    """The value of a rank-0 numeric TensorProto, else None."""
    if tensor.tensor_shape.dim:
        return None
    spec = _TENSOR_DTYPES.get(tensor.dtype)
    if spec is None:
        return None
    field_name, fmt = spec
    if tensor.tensor_content:
        content = tensor.tensor_content
        if len(content) != struct.calcsize(fmt):
            return None
        return float(struct.unpack(fmt, content)[0])
    values = getattr(tensor, field_name)
    if len(values) != 1:
        return None
    if field_name == "half_val":  # half values are stored as their 16-bit patterns
        return float(struct.unpack("<e", struct.pack("<H", values[0] & 0xFFFF))[0])
    return float(values[0])


def _value_scalar(value: Any) -> float | None:
    """The scalar of a ``Summary.Value`` proto (simple_value or scalar tensor), else None."""
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return value.simple_value
    if kind == "tensor" and value.metadata.plugin_data.plugin_name in ("", "scalars"):
        return _tensor_scalar(value.tensor)
    return None


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    result, shift = byte & 0x7F, 7
    while True:
        pos += 1
        byte = buf[pos]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos + 1
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def _skip(buf: bytes, pos: int, wire: int) -> int:
    if wire == 0:
        return _varint(buf, pos)[1]
    if wire == 1:
        return pos + 8
    if wire == 2:
        length, pos = _varint(buf, pos)
        return pos + length
    if wire == 5:
        return pos + 4
    raise ValueError(f"unsupported wire type {wire}")


def _decode_value(buf: bytes, pos: int, end: int) -> tuple[str, float] | None:
    """Fast path for one ``Summary.Value``: (tag, value) of a scalar, None if not a scalar."""
    tag = ""
    number: float | None = None
    kind = 0  # field number of the last "value" oneof member seen (proto3: last one wins)
    while pos < end:
        key, pos = _varint(buf, pos)
        field, wire = key >> 3, key & 7
        if field == 1 and wire == 2:
            length, pos = _varint(buf, pos)
            tag = buf[pos : pos + length].decode("utf-8")
            pos += length
        elif field == 2 and wire == 5:
            number = _F32.unpack_from(buf, pos)[0]
            kind = 2
            pos += 4
        else:
            if field in (3, 4, 5, 6, 8):
                kind = field
            pos = _skip(buf, pos, wire)
    if pos != end:
        raise ValueError("value overruns its length")
    if kind == 2:
        return tag, number  # type: ignore[return-value]
    return None  # histogram, image, audio or nothing: not a scalar (tensors never get here)


def _decode_event(buf: bytes) -> tuple[int, float, list[tuple[str, float]]] | None:
    """Fast path for one ``Event``: (step, wall_time, scalars); None when a value needs the full proto."""
    pos, end = 0, len(buf)
    step, wall_time = 0, 0.0
    scalars: list[tuple[str, float]] = []
    while pos < end:
        key, pos = _varint(buf, pos)
        field, wire = key >> 3, key & 7
        if field == 1 and wire == 1:
            wall_time = _F64.unpack_from(buf, pos)[0]
            pos += 8
        elif field == 2 and wire == 0:
            step, pos = _varint(buf, pos)
            if step >= 1 << 63:
                step -= 1 << 64
        elif field == 5 and wire == 2:
            length, pos = _varint(buf, pos)
            summary_end = pos + length
            while pos < summary_end:
                key, pos = _varint(buf, pos)
                if key != 0x0A:  # Summary.value (field 1, length-delimited)
                    pos = _skip(buf, pos, key & 7)
                    continue
                length, pos = _varint(buf, pos)
                value_end = pos + length
                if value_end > summary_end:
                    raise ValueError("value overruns the summary")
                if _has_tensor(buf, pos, value_end):
                    return None
                item = _decode_value(buf, pos, value_end)
                if item is not None:
                    scalars.append(item)
                pos = value_end
            if pos != summary_end:
                raise ValueError("summary overruns its length")
        else:
            pos = _skip(buf, pos, wire)
    if pos != end:
        raise ValueError("event overruns the record")
    return step, wall_time, scalars


def _has_tensor(buf: bytes, pos: int, end: int) -> bool:
    while pos < end:
        key, pos = _varint(buf, pos)
        if key >> 3 == 8:
            return True
        pos = _skip(buf, pos, key & 7)
    return False


def read_scalars(path: Path) -> dict[str, list[ScalarEvent]]:
    """Read every scalar of an event file, per tag, in file order (no sampling).

    Simple-value events (what torch's SummaryWriter writes) are decoded by a small wire
    decoder; any event holding a tensor, or that the fast path cannot decode, goes through
    tensorboard's compiled ``Event`` proto.

    Args:
        path: an ``events.out.tfevents.*`` file.

    Returns:
        ``{tag: [ScalarEvent, ...]}``; tags in order of first appearance.

    Raises:
        EventFileError: a truncated or corrupt record, or a record that is not an Event.
    """
    scalars: dict[str, list[ScalarEvent]] = {}
    for offset, payload in iter_records(path):
        try:
            decoded = _decode_event(payload)
        except (ValueError, IndexError, struct.error, UnicodeDecodeError):
            decoded = None
        if decoded is None:
            decoded = _decode_event_proto(path, offset, payload)
        step, wall_time, items = decoded
        for tag, number in items:
            bucket = scalars.get(tag)
            if bucket is None:
                bucket = scalars[tag] = []
            bucket.append(ScalarEvent(step, wall_time, number))
    return scalars


def _decode_event_proto(
    path: Path, offset: int, payload: bytes
) -> tuple[int, float, list[tuple[str, float]]]:
    event = event_pb2.Event()
    try:
        event.ParseFromString(payload)
    except DecodeError as err:
        raise EventFileError(
            f"{path}: record at byte offset {offset} is not a TensorBoard Event ({err})"
        ) from err
    items: list[tuple[str, float]] = []
    for value in event.summary.value:
        number = _value_scalar(value)
        if number is not None:
            items.append((value.tag, number))
    return event.step, event.wall_time, items
