"""Read back the history an offline W&B run logged, from its ``run-<id>.wandb`` file.

wandb 0.31 ships no Python reader for its transaction log (its Go core writes it), so this
follows the on-disk framing the core uses: a 7-byte file header (``:W&B``, magic 0xBEE1,
version 0), then LevelDB log records in 32 KiB blocks, each record a 7-byte header (CRC-32 of
the record type byte and the payload, payload length, type: full / first / middle / last
fragment) and a payload. Each reassembled payload is a ``wandb_internal_pb2.Record``, parsed
with wandb's own protobuf classes. Any framing or checksum error raises, so a test never reads
a partial history without knowing.
"""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

from wandb.proto import wandb_internal_pb2

BLOCK = 32768
HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def _payloads(data: bytes) -> list[bytes]:
    ident, magic, version = struct.unpack("<4sHB", data[:HEADER])
    if (ident, magic, version) != (b":W&B", 0xBEE1, 0):
        raise ValueError(f"not a W&B transaction log: header {ident!r} {magic:#x} {version}")
    out: list[bytes] = []
    pending: bytes | None = None
    offset = HEADER
    while offset + HEADER <= len(data):
        if BLOCK - offset % BLOCK < HEADER:  # a block's tail too short for a header is padding
            offset += BLOCK - offset % BLOCK
            continue
        crc, length, kind = struct.unpack("<IHB", data[offset : offset + HEADER])
        if kind == 0 and crc == 0 and length == 0:  # zero padding up to the end of the block
            offset += BLOCK - offset % BLOCK
            continue
        payload = data[offset + HEADER : offset + HEADER + length]
        if len(payload) != length or crc != zlib.crc32(payload, zlib.crc32(bytes([kind]))):
            raise ValueError(f"corrupt record at byte {offset}")
        offset += HEADER + length
        if kind == FULL:
            out.append(payload)
        elif kind == FIRST:
            pending = payload
        elif kind in (MIDDLE, LAST) and pending is not None:
            pending += payload
            if kind == LAST:
                out.append(pending)
                pending = None
        else:
            raise ValueError(f"record type {kind} out of sequence at byte {offset}")
    if pending is not None:
        raise ValueError("the log ends inside a fragmented record")
    return out


def history(run_dir: Path) -> dict[int, dict[str, float]]:
    """The logged values per step of the offline run in ``run_dir`` (W&B's own ``_``-keys
    such as ``_runtime`` left out)."""
    files = list(run_dir.glob("run-*.wandb"))
    if len(files) != 1:
        raise ValueError(f"expected one run-*.wandb file in {run_dir}, found {files}")
    steps: dict[int, dict[str, float]] = {}
    for payload in _payloads(files[0].read_bytes()):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(payload)
        if not record.HasField("history"):
            continue
        row = steps.setdefault(record.history.step.num, {})
        for item in record.history.item:
            key = ".".join(item.nested_key) or item.key
            if not key.startswith("_"):
                row[key] = json.loads(item.value_json)
    return steps
