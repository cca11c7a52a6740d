"""What a dataset holds: rows, schema, groups, licenses, embeddings, identity and history.

``cladebench info`` prints this; run records embed part of it as provenance. Counts are computed with
the projection pushed down to Lance, so describing a dataset of images reads only the small columns.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from cladebench.errors import CladebenchError, SchemaError
from cladebench.store.indices import indices
from cladebench.store.left_out import find_left_out, left_out_counts, left_out_lines, read_left_out
from cladebench.store.schema import (
    EMBEDDING_PREFIX,
    EMBEDDING_SIDECAR,
    SCHEMA_METADATA_KEY,
    embedding_metadata,
    group_columns,
)
from cladebench.store.sql import sql_identifier
from cladebench.store.versions import fingerprint, tags, versions

if TYPE_CHECKING:
    import lance


def _value_counts(dataset: lance.LanceDataset, column: str) -> dict[str, int]:
    """Counts of each value of a column, most frequent first; nulls counted under ``null``."""
    values = dataset.to_table(columns=[column]).column(0)
    if pa.types.is_list(values.type) or pa.types.is_large_list(values.type):
        values = pc.list_flatten(values)
    counts = pc.value_counts(values)
    pairs = [(("null" if v is None else str(v)), c) for v, c in zip(
        counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True)]
    return dict(sorted(pairs, key=lambda kv: (-kv[1], kv[0])))


def _embedding_summary(dataset: lance.LanceDataset, field: pa.Field) -> dict[str, object]:
    """Width, valid rows and metadata of an ``emb_*`` column. A column made elsewhere may have any name and
    type: its name is quoted for the filter, and a type that is no vector is shown, not fatal (``info`` is
    how a person finds out what a dataset holds)."""
    if "`" in field.name:  # cannot be written in a Lance filter: count the nulls from the column itself
        values = dataset.to_table(columns=[field.name]).column(0)
        valid = len(values) - values.null_count
    else:
        valid = dataset.count_rows(filter=f"{sql_identifier(field.name)} IS NOT NULL")
    return {
        "dim": field.type.list_size if pa.types.is_fixed_size_list(field.type) else None,
        "type": str(field.type),
        "valid_rows": valid,
        "metadata": embedding_metadata(field),
    }


def _fingerprint(dataset: lance.LanceDataset, wanted: bool) -> dict[str, str | None]:
    if not wanted:
        return {"fingerprint": None, "fingerprint_problem": "not computed (--no-fingerprint)"}
    if "uuid" not in dataset.schema.names:
        return {"fingerprint": None, "fingerprint_problem": "no uuid column"}
    try:
        return {"fingerprint": fingerprint(dataset), "fingerprint_problem": None}
    except SchemaError as problem:
        return {"fingerprint": None, "fingerprint_problem": str(problem)}


def describe(dataset: lance.LanceDataset, uri: str, *, with_fingerprint: bool = True) -> dict[str, object]:
    """A JSON-ready description of a dataset (what ``cladebench info`` shows).

    ``info`` is where a user looks when a dataset misbehaves, so a dataset without a fingerprint (no
    ``uuid`` column, or uuids that are not text, null or hold a newline: written by other tools) is still
    described, with ``fingerprint`` null and ``fingerprint_problem`` saying why.
    """
    schema = dataset.schema
    names = set(schema.names)
    groups = {c: _value_counts(dataset, c) for c in group_columns(schema)}
    sidecar_path = Path(uri) / EMBEDDING_SIDECAR
    sidecar = json.loads(sidecar_path.read_text()) if "://" not in uri and sidecar_path.exists() else None
    description: dict[str, object] = {
        "uri": uri,
        "rows": dataset.count_rows(),
        "version": dataset.version,
        "versions": versions(dataset),
        "tags": tags(dataset),
        **_fingerprint(dataset, with_fingerprint),
        "schema_version": (schema.metadata or {}).get(SCHEMA_METADATA_KEY, b"").decode() or None,
        "schema": [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in schema],
        "groups": groups,
        "sources": _value_counts(dataset, "source_dataset") if "source_dataset" in names else {},
        "licenses": _value_counts(dataset, "license_name") if "license_name" in names else {},
        "embeddings": {f.name: _embedding_summary(dataset, f) for f in schema
                       if f.name.startswith(EMBEDDING_PREFIX)},
        "embedding_models_json": sidecar,
        "indices": indices(dataset),
        "left_out": _left_out(uri),
    }
    return description


def _left_out(uri: str) -> dict[str, object] | None:
    """What the build that made the dataset left out (:mod:`cladebench.store.left_out`), when it is beside it."""
    path = find_left_out(uri)
    if path is None:
        return None
    try:
        return {"path": str(path), "counts": left_out_counts(read_left_out(path))}
    except (CladebenchError, OSError) as error:  # a file beside the dataset is no reason to refuse its info
        return {"path": str(path), "counts": {}, "unread": " ".join(str(error).split())}


def _table(rows: list[tuple[str, ...]], indent: str = "  ") -> str:
    if not rows:
        return f"{indent}(none)"
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(indent + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def format_description(d: dict[str, Any], *, max_values: int = 12) -> str:
    """Human-readable text of :func:`describe`'s output."""
    lines = [
        f"dataset      {d['uri']}",
        f"rows         {d['rows']:,}",
        f"version      {d['version']} (of {len(d['versions'])}; tags: "
        + (", ".join(f"{k}={v}" for k, v in d["tags"].items()) or "none") + ")",
        f"fingerprint  {d['fingerprint'] or 'none: ' + str(d.get('fingerprint_problem'))}",
        "",
        "columns",
        _table([(c["name"], c["type"], "" if c["nullable"] else "not null") for c in d["schema"]]),
    ]

    def counts(title: str, values: dict[str, int]) -> None:
        shown = list(values.items())[:max_values]
        rest = len(values) - len(shown)
        lines.extend(["", title])
        lines.append(_table([(k, f"{v:,}") for k, v in shown]))
        if rest > 0:
            lines.append(f"  ... and {rest} more")

    for column, values in d["groups"].items():
        counts(f"groups: {column} ({len(values)} values)", values)
    if d["sources"]:
        counts("sources", d["sources"])
    if d["licenses"]:
        counts("licenses", d["licenses"])
    lines.extend(["", "embeddings"])
    if not d["embeddings"]:
        lines.append("  (none)")
    for name, e in d["embeddings"].items():
        meta = e["metadata"]
        shape = f"dim {e['dim']}" if e.get("dim") is not None else f"type {e.get('type')} (not a fixed-width vector)"
        lines.append(f"  {name}: {shape}, {e['valid_rows']:,} valid rows, model {meta.get('model')}"
                     + (f" @ {meta['revision']}" if meta.get("revision") else ""))
        for key, value in meta.items():
            if key not in ("model", "dim", "revision"):
                lines.append(f"    {key}: {value}")
    lines.extend(["", "indices"])
    lines.append(_table([(i["name"], str(i["type"]), ", ".join(i["columns"])) for i in d["indices"]]))
    if d.get("left_out") and d["left_out"].get("unread"):
        lines.extend(["", f"left-out record {d['left_out']['path']} not read: {d['left_out']['unread']}"])
    elif d.get("left_out"):
        lines.extend(["", *left_out_lines(d["left_out"]["counts"], d["left_out"]["path"])])
    return "\n".join(lines)
