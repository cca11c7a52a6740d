"""The card Hugging Face ``datasets`` reads in a Lance dataset's folder, so that ``load_dataset`` sees images.

``datasets.load_dataset(PATH)`` opens a Lance folder with its ``lance`` builder, which guesses the type of each
binary column from the first bytes of its first row. Our images are WebP, whose first bytes (``RIFF``) it takes
for an AVI video, and reading a row then fails (it wants a video decoder). The Arrow schema's ``huggingface``
metadata does not help on this path: ``datasets`` keeps a feature from it only when the feature's Arrow type
equals the column's, and an ``Image`` is a struct where the column is ``large_binary``; the guess then overrides
it anyway. What the builder does obey is a card in the folder it loads: ``.huggingface.yaml`` (the standalone
form of a README's YAML header, which it overrides key by key) naming a config with ``features``. Then the
builder skips the guess and casts each batch to those features (``large_binary`` bytes to ``Image``).

So every write by cladebench that makes a local dataset or changes its columns writes :data:`CARD_NAME` too
(:func:`write_datasets_card`, from :func:`~cladebench.store.dataset.write_dataset`, subsets and a new embedding
column): one default config whose ``features`` describe every column, in the YAML form ``datasets`` writes
itself, and whose ``columns`` name the same columns, so that a column added later by another
tool is left out of ``load_dataset`` rather than failing its cast. ``image`` is an ``Image``; every other column
gets the feature ``datasets`` would infer from its Arrow type. A schema with a column this module cannot
describe gets no card, and ``datasets`` guesses as it did. A ``.huggingface.yaml`` that cladebench did not write
is never overwritten. Datasets written before this have no card and are read as before.

Example:
    >>> import pyarrow as pa
    >>> card = datasets_card(pa.schema([("uuid", pa.string()), ("image", pa.large_binary()),
    ...                                 ("emb_x", pa.list_(pa.float32(), 4))]))
    >>> for feature in card["configs"][0]["features"]:
    ...     print(feature)
    {'name': 'uuid', 'dtype': 'string'}
    {'name': 'image', 'dtype': 'image'}
    {'name': 'emb_x', 'list': 'float32', 'length': 4}
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from cladebench.paths import atomic_write

CARD_NAME = ".huggingface.yaml"
"""File ``datasets`` reads from the root of a folder it loads, as it reads a README's YAML header."""
CARD_MARKER = "# Written by cladebench"
"""First line of a card cladebench wrote: the only kind it rewrites."""
IMAGE_COLUMNS = frozenset({"image"})
"""Binary columns that hold encoded images (the canonical schema's ``image``)."""


def _dtype(t: pa.DataType) -> str | None:
    """``datasets``' name for a primitive Arrow type (its ``_arrow_to_datasets_dtype``), or None."""
    renamed = {pa.float16(): "float16", pa.float32(): "float32", pa.float64(): "float64", pa.date32(): "date32",
               pa.date64(): "date64"}
    if t in renamed:
        return renamed[t]
    if pa.types.is_timestamp(t):
        return f"timestamp[{t.unit}, tz={t.tz}]" if t.tz else f"timestamp[{t.unit}]"
    if pa.types.is_time(t) or pa.types.is_duration(t):
        return f"{'duration' if pa.types.is_duration(t) else str(t).split('[')[0]}[{t.unit}]"
    plain = (pa.types.is_boolean, pa.types.is_integer, pa.types.is_string, pa.types.is_large_string,
             pa.types.is_binary, pa.types.is_large_binary)
    return str(t) if any(check(t) for check in plain) else None


def _feature(t: pa.DataType) -> dict[str, object] | None:
    """The YAML body of the feature ``datasets`` infers for Arrow type ``t`` (without its name), or None."""
    if pa.types.is_fixed_size_list(t) or pa.types.is_list(t) or pa.types.is_large_list(t):
        inner = _feature(t.value_type)
        if inner is None:
            return None
        key = "large_list" if pa.types.is_large_list(t) else "list"
        body: dict[str, object] = {key: inner["dtype"] if set(inner) == {"dtype"} else inner}
        if pa.types.is_fixed_size_list(t):
            body["length"] = t.list_size
        return body
    if pa.types.is_struct(t):
        fields = [_named(t.field(i).name, t.field(i).type) for i in range(t.num_fields)]
        return None if any(f is None for f in fields) else {"struct": fields}
    dtype = _dtype(t)
    return None if dtype is None else {"dtype": dtype}


def _named(name: str, t: pa.DataType) -> dict[str, object] | None:
    body = _feature(t)
    return None if body is None else {"name": name, **body}


def datasets_card(schema: pa.Schema) -> dict[str, object] | None:
    """The card's content for a dataset of ``schema``; None when a column's type has no ``datasets`` feature."""
    features = []
    for field in schema:
        if field.name in IMAGE_COLUMNS and (pa.types.is_binary(field.type) or pa.types.is_large_binary(field.type)):
            features.append({"name": field.name, "dtype": "image"})
            continue
        feature = _named(field.name, field.type)
        if feature is None:
            return None
        features.append(feature)
    return {"configs": [{"config_name": "default", "columns": list(schema.names), "features": features}]}


def write_datasets_card(folder: Path, schema: pa.Schema) -> Path | None:
    """Write (or refresh) the card in the local dataset folder ``folder`` for ``schema``; the path, or None.

    Nothing is written for a schema the card cannot describe (and a card of ours from before is removed, so
    that it does not describe columns the dataset no longer has), nor over a ``.huggingface.yaml`` that
    cladebench did not write.
    """
    import yaml

    path = Path(folder) / CARD_NAME
    ours = not path.exists() or path.read_text("utf-8", errors="replace").startswith(CARD_MARKER)
    if not ours:
        return None
    card = datasets_card(schema)
    if card is None:
        path.unlink(missing_ok=True)
        return None
    text = (f"{CARD_MARKER}, rewritten with each change of the columns: how Hugging Face `datasets` types them\n"
            "# (`image` holds encoded images, not video). Remove this line to keep your own edits.\n")
    atomic_write(path, text + yaml.safe_dump(card, sort_keys=False))
    return path


__all__ = ["CARD_MARKER", "CARD_NAME", "IMAGE_COLUMNS", "datasets_card", "write_datasets_card"]
