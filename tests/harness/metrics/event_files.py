"""Tiny TFRecord event-file writer for tests (no torch): simple-value and tensor scalars."""

from __future__ import annotations

import struct
from collections.abc import Iterable
from pathlib import Path

from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, types_pb2

from harness.metrics.events import masked_crc32c


def frame(payload: bytes) -> bytes:
    """One TFRecord: length, masked CRC of the length, payload, masked CRC of the payload."""
    header = struct.pack("<Q", len(payload))
    return (
        header
        + struct.pack("<I", masked_crc32c(header))
        + payload
        + struct.pack("<I", masked_crc32c(payload))
    )


def scalar_event(step: int, values: dict[str, float], wall_time: float = 1000.0) -> bytes:
    summary = summary_pb2.Summary(
        value=[summary_pb2.Summary.Value(tag=t, simple_value=v) for t, v in values.items()]
    )
    return event_pb2.Event(step=step, wall_time=wall_time, summary=summary).SerializeToString()


def tensor_event(
    step: int, tag: str, value: float, *, dtype: int = types_pb2.DT_FLOAT, packed: bool = False
) -> bytes:
    tensor = tensor_pb2.TensorProto(dtype=dtype)
    if packed:
        fmt = {types_pb2.DT_FLOAT: "<f", types_pb2.DT_DOUBLE: "<d"}[dtype]
        tensor.tensor_content = struct.pack(fmt, value)
    elif dtype == types_pb2.DT_DOUBLE:
        tensor.double_val.append(value)
    else:
        tensor.float_val.append(value)
    metadata = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
    )
    summary = summary_pb2.Summary(
        value=[summary_pb2.Summary.Value(tag=tag, tensor=tensor, metadata=metadata)]
    )
    return event_pb2.Event(step=step, wall_time=2000.0, summary=summary).SerializeToString()


def write_event_file(
    run_dir: Path, payloads: Iterable[bytes], name: str = "events.out.tfevents.1764410400.host.1.0"
) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / name
    version = event_pb2.Event(wall_time=1.0, file_version="brain.Event:2").SerializeToString()
    path.write_bytes(b"".join(frame(p) for p in [version, *payloads]))
    return path


def write_scalars(run_dir: Path, series: dict[str, list[float]], **kw: str) -> Path:
    """One event per step holding every tag that has a value at that step."""
    length = max(len(v) for v in series.values())
    payloads = [
        scalar_event(
            step * 64, {tag: vals[step] for tag, vals in series.items() if step < len(vals)}
        )
        for step in range(length)
    ]
    return write_event_file(run_dir, payloads, **kw)
