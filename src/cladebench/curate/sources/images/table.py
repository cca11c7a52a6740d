"""A table of images: CSV, TSV or Parquet with a path or URL column, and a Hugging Face ``datasets`` dataset.

Each row is one image. Its columns are mapped by :mod:`.columns`; the image cell is a URL (``http://``,
``https://``: fetched through the downloader), a path (relative to ``--images-dir``, else to the table's folder:
a flat folder of photos with a labels table beside it), the image's bytes themselves (a binary column), or, in a
Hugging Face dataset, an ``Image`` feature's ``{bytes, path}``. A Hugging Face dataset is read from its Parquet
files or from the folder ``save_to_disk`` writes (its ``state.json`` and Arrow files; a ``DatasetDict``'s splits
each in a folder), without importing ``datasets``: the features in the schema's ``huggingface`` metadata name
the ``Image`` column and turn a ``ClassLabel``'s integers into its names (``-1``, the library's "no label",
is a row left out as ``no_label``; a number past its names, as ``bad_label``).

Tables are read a batch at a time (CSV with every column as text, Parquet and Arrow by record batch), so a
table of millions of rows is read in bounded memory. A table without an image column, or without any column a
label can come from, is a :class:`~cladebench.errors.SchemaError` naming its columns, before anything is written.

Why a module: the tabular kinds share the column mapping and the batches; only how a file is opened differs.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from cladebench.curate.sources import parquet_files, utf8_errors
from cladebench.curate.sources.images.columns import RANK_FIELDS, SPELLINGS, map_columns, mapped_values, text
from cladebench.curate.sources.images.records import ImageRecord, refuse_special
from cladebench.errors import CladebenchError, SchemaError

TEXT_SUFFIXES = (".csv", ".tsv", ".txt", ".tab")
"""Delimited text files, by suffix; the delimiter is the header's (:func:`_text_batches`)."""
TABLE_SUFFIXES = (*TEXT_SUFFIXES, ".parquet", ".arrow")
"""Files read as a table."""
_BATCH_ROWS = 64
"""Rows turned into Python values at once: a Hugging Face dataset's rows hold their images."""


def _hf_features(schema: pa.Schema) -> dict[str, object]:
    raw = (schema.metadata or {}).get(b"huggingface")
    if raw is None:
        return {}
    try:
        features = json.loads(raw).get("info", {}).get("features", {})
    except (ValueError, AttributeError):
        return {}
    return features if isinstance(features, dict) else {}


def _class_names(features: Mapping[str, object]) -> dict[str, list[str]]:
    return {name: list(f["names"]) for name, f in features.items()
            if isinstance(f, dict) and f.get("_type") == "ClassLabel" and isinstance(f.get("names"), list)}


def saved_dataset_files(folder: Path) -> list[Path]:
    """The Arrow files of a ``save_to_disk`` folder (a ``Dataset``, or every split of a ``DatasetDict``), in the
    order its ``state.json`` files list them; splits by name."""
    files: list[Path] = []
    for state_path in sorted(folder.rglob("state.json")):
        try:
            state = json.loads(state_path.read_text(encoding="utf-8"))
            names = [entry["filename"] for entry in state["_data_files"]]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise SchemaError(f"{state_path}: not the state.json of a saved Hugging Face dataset ({exc})") from None
        files.extend(state_path.parent / name for name in names)
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise SchemaError(f"{folder}: the saved dataset lists files that are not there: {missing}")
    return files


class TableSource:
    """The rows of one or more tables of the same columns, as image records."""

    kind = "table"

    def __init__(self, path: Path, overrides: Mapping[str, str], images_dir: Path | None = None) -> None:
        self.path = Path(path)
        self.images_dir = images_dir
        refuse_special(self.path, "a table")
        if self.path.is_dir():
            saved = saved_dataset_files(self.path)
            self.files = saved or parquet_files(self.path, what="table")
        elif self.path.is_file():
            self.files = [self.path]
        else:
            raise CladebenchError(f"{self.path}: no such file or folder")
        self.schema = self._schema(self.files[0])
        features = _hf_features(self.schema)
        self.class_names = _class_names(features)
        overrides = dict(overrides)
        image_features = [n for n, f in features.items() if isinstance(f, dict) and f.get("_type") == "Image"]
        if "image" not in overrides and image_features:
            overrides["image"] = image_features[0]
        where = str(self.files[0])
        self.mapping = map_columns(self.schema.names, overrides, where=where)
        if "image" not in self.mapping:
            raise SchemaError(f"{where}: no image column (a path or URL); expected one of "
                              f"{list(SPELLINGS['image'])} in any case, or --column image=COLUMN; the columns are "
                              f"{self.schema.names}")
        if "label" not in self.mapping and not any(r in self.mapping for r in RANK_FIELDS):
            raise SchemaError(f"{where}: no column to take a label from (a scientific name or a rank); expected one "
                              f"of {list(SPELLINGS['label'])} or a rank column, or --column label=COLUMN; the columns "
                              f"are {self.schema.names}")
        self.notes: dict[str, object] = {"files": [str(f) for f in self.files], "columns": self.mapping}

    def _schema(self, path: Path) -> pa.Schema:
        try:
            batches = self._batches(path)
            first = next(batches, None)
        except (OSError, pa.ArrowInvalid) as exc:
            raise SchemaError(f"{path}: cannot be read as a table: {exc}") from None
        if first is None:
            raise SchemaError(f"{path}: an empty table")
        return first.schema

    def _batches(self, path: Path) -> Iterator[pa.RecordBatch]:
        suffix = path.suffix.lower()
        if suffix in TEXT_SUFFIXES:
            yield from _text_batches(path)
        elif suffix == ".arrow":
            with pa.memory_map(str(path)) as source:
                yield from pa.ipc.open_stream(source)
        else:
            import pyarrow.parquet as pq

            yield from pq.ParquetFile(path).iter_batches(batch_size=_BATCH_ROWS)

    def records(self, images: bool = True) -> Iterator[ImageRecord]:
        for path in self.files:
            base = self.images_dir or path.parent
            name = path.relative_to(self.path).as_posix() if self.path.is_dir() else path.name
            number = 0  # 1-based data row of this file, as the failures table names it
            try:
                for batch in self._batches(path):
                    for start in range(0, batch.num_rows, _BATCH_ROWS):  # an Arrow file's batch may be large
                        for cells in batch.slice(start, _BATCH_ROWS).to_pylist():
                            number += 1
                            yield self._record(cells, f"{name} row {number}", base, images)
            except (OSError, pa.ArrowInvalid) as exc:
                raise SchemaError(f"{path}: cannot be read as a table after row {number}: {exc}") from None

    def _record(self, cells: dict[str, Any], where: str, base: Path, images: bool) -> ImageRecord:
        problem = None
        for column, names in self.class_names.items():
            value = cells.get(column)
            if isinstance(value, int) and 0 <= value < len(names):
                cells[column] = names[value]
            elif isinstance(value, int):  # -1 is the datasets library's "no label"; no class is ever named "-1"
                cells[column] = None
                problem = problem or (("no_label", f"column {column!r} is -1, a ClassLabel's 'no label'")
                                      if value == -1 else ("bad_label", f"column {column!r} is class {value}, "
                                                           f"but its ClassLabel names {len(names)} classes"))
        mapped = mapped_values(cells, self.mapping)
        record = ImageRecord(key=where, where=where, label=mapped.label, ranks=mapped.ranks, values=mapped.values,
                             set_null=mapped.dropped, problem=problem)
        cell = cells.get(self.mapping["image"])
        if isinstance(cell, bytes) and cell:  # a binary column holds the image itself, not where it is
            record.image = cell if images else b""
            return record
        if isinstance(cell, dict):  # a Hugging Face Image feature
            if cell.get("bytes"):
                record.image = cell["bytes"] if images else b""
                return record
            cell = cell.get("path")
        location = text(cell)
        if location is None:
            record.problem = ("no_image", f"column {self.mapping['image']!r} is empty")
        elif location.startswith(("http://", "https://")):
            record.url = record.key = location
            record.values["source_url"] = record.values.get("source_url") or location
        elif "://" in location:
            record.problem = ("bad_url", f"{location!r}: only http(s) URLs and local paths are read")
        else:
            record.path = (base / location).resolve()
            record.key = location
        return record


def _text_batches(path: Path) -> Iterator[pa.RecordBatch]:
    """A delimited text file a batch at a time, every column as text (no type guessed from the first rows).

    Tab-separated when its header has more tabs than commas or semicolons, whatever the suffix (GBIF's "simple CSV"
    download is tab-separated), and then read without quoting, as GBIF writes it; semicolon-separated when it has
    more semicolons (a spreadsheet's CSV in the many locales whose decimal mark is a comma); otherwise CSV, with
    quotes.
    """
    import pyarrow.csv as pacsv

    with utf8_errors(path), open(path, encoding="utf-8-sig") as handle:
        header = next(iter(handle), "").rstrip("\r\n")
    # the header's commonest separator: ties go to the comma (a one-column table has none)
    delimiter = max(("\t", ",", ";"), key=lambda d: (header.count(d), d == ","))
    quoted = delimiter != "\t"
    names = next(csv.reader([header], delimiter=delimiter), []) if quoted else header.split(delimiter)
    parse = pacsv.ParseOptions(delimiter=delimiter, quote_char='"' if quoted else False, newlines_in_values=quoted)
    convert = pacsv.ConvertOptions(column_types={name: pa.string() for name in names}, strings_can_be_null=True)
    with utf8_errors(path):
        reader = pacsv.open_csv(path, parse_options=parse, convert_options=convert,
                                read_options=pacsv.ReadOptions(block_size=1 << 20))
        yield from reader


__all__ = ["TABLE_SUFFIXES", "TEXT_SUFFIXES", "TableSource", "saved_dataset_files"]
