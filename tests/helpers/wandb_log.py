"""The records of an offline W&B run, read from its ``run-ID.wandb`` file as ``wandb sync`` reads it: a 7-byte
header (``:W&B``, magic, version), then LevelDB-log records in 32 KiB blocks (checksum, length, type; a record
split over blocks comes in FIRST, MIDDLE and LAST parts), each a protobuf ``Record`` of wandb's own. wandb 0.31
reads these in its Go core only, so the export tests read them here to check what was written."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BLOCK = 32 * 1024
HEADER = 7


def records(path: Path) -> Iterator[Any]:
    """Every ``wandb_internal_pb2.Record`` in the file, in order."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is no W&B transaction log"
    position, parts = HEADER, b""
    while position + HEADER <= len(data):
        left = BLOCK - position % BLOCK
        if left < HEADER:  # a block's tail too short for a header is padding
            position += left
            continue
        _, length, kind = struct.unpack("<IHB", data[position:position + HEADER])
        if length == 0 and kind == 0:
            position += left
            continue
        chunk = data[position + HEADER:position + HEADER + length]
        position += HEADER + length
        parts = chunk if kind in (1, 2) else parts + chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(parts)
            yield record


def offline_run(folder: Path) -> dict[str, Any]:
    """An offline run folder's id, name, config, summary and artifacts (name -> file paths), as written."""
    found: dict[str, Any] = {"config": {}, "summary": {}, "artifacts": {}}
    (log,) = folder.glob("run-*.wandb")
    for record in records(log):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            found.update(id=record.run.run_id, name=record.run.display_name, project=record.run.project)
            found["config"].update({u.key: json.loads(u.value_json) for u in record.run.config.update})
        elif kind == "summary":
            found["summary"].update({u.key: json.loads(u.value_json) for u in record.summary.update if u.key})
        elif kind == "artifact":
            found["artifacts"][record.artifact.name] = {e.path for e in record.artifact.manifest.contents}
    return found
