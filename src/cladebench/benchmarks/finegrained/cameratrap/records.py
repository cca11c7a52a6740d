"""COCO Camera Traps metadata, read as a stream: the images a camera-trap collection labels with chosen categories.

LILA BC publishes each camera-trap collection's labels as one COCO Camera Traps (CCT) JSON file
(``data_management/README.md`` of the MegaDetector repository describes it): an object with ``info``
(``version``, ``description``), ``images`` (``id``, ``file_name``; optionally ``width``, ``height``,
``rights_holder``, ``datetime``, ``seq_id``, ``seq_num_frames``, ``frame_num``, ``location`` (an int in older
collections, a string now), ``corrupt``), ``categories`` (``id``: a non-negative int, ``name``) and
``annotations`` (``id``, ``image_id``, ``category_id``; optionally ``bbox`` in absolute pixels and
``sequence_level_annotation``). A collection holds up to millions of images, so nothing here loads the whole
file: each top-level array is read with ijson (a C-backed incremental parser; one pass per array), and only
what the caller selected is kept in memory: the category table, the images that carry a selected category,
and those images' records. A file may be plain JSON, gzip, or a zip holding one ``.json`` member (how LILA
ships them); the format is sniffed from the first bytes, so a downloaded copy without its extension reads
the same.

**Bad records are counted, never dropped silently.** A record that does not follow the format (not an object,
no id, a category id that is not an integer, an annotation naming an unknown category or image, an image
without a file name, an image whose file name has a ``..`` segment or a control character (never followed
out of the image root), an image listed twice) is skipped and counted under its reason in a :class:`BadRecords`,
with a few examples, so a card can say how many of each there were. A file that is not JSON at all, or that has
no ``categories`` (or no ``annotations`` or ``images`` array), is a one-line error naming the file.

Why a module: the builders that read camera-trap collections (``build cameratrap``) need the format's rules in
one place; :mod:`.megadetector` reads the detector's output with the same helpers.

Example:
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> path = Path(tempfile.mkdtemp()) / "cct.json"
    >>> _ = path.write_text(json.dumps({
    ...     "info": {"version": "1.0", "description": "example"},
    ...     "categories": [{"id": 0, "name": "empty"}, {"id": 7, "name": "peromyscus"}],
    ...     "annotations": [{"id": "a1", "image_id": "i1", "category_id": 7},
    ...                     {"id": "a2", "image_id": "i2", "category_id": 0}],
    ...     "images": [{"id": "i1", "file_name": "cam1/i1.jpg", "location": 3, "seq_id": "s1"},
    ...                {"id": "i2", "file_name": "cam1/i2.jpg"}]}))
    >>> bad = BadRecords()
    >>> categories = read_categories(path, bad)
    >>> labelled = labelled_images(path, {7}, categories, bad)
    >>> [(image.image_id, image.file_name, image.location, image.seq_id, image.labels)
    ...  for image in read_images(path, labelled, bad)]
    [('i1', 'cam1/i1.jpg', '3', 's1', ('peromyscus',))]
"""

from __future__ import annotations

import contextlib
import gzip
import zipfile
from collections import Counter
from collections.abc import Collection, Generator, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from cladebench.errors import CladebenchError, SchemaError

EXAMPLES_PER_REASON = 3
"""Examples kept per bad-record reason (the card shows them; the count is always exact)."""


@dataclass
class BadRecords:
    """Records skipped for not following a format, counted per reason with a few examples each."""

    counts: Counter[str] = field(default_factory=Counter)
    """Skipped records per reason."""
    examples: dict[str, list[str]] = field(default_factory=dict)
    """Up to :data:`EXAMPLES_PER_REASON` short descriptions per reason."""

    def add(self, reason: str, example: object) -> None:
        self.counts[reason] += 1
        kept = self.examples.setdefault(reason, [])
        if len(kept) < EXAMPLES_PER_REASON:
            kept.append(str(example)[:200])

    def as_dict(self) -> dict[str, object]:
        return {"counts": dict(sorted(self.counts.items())), "examples": dict(sorted(self.examples.items()))}


# --- opening and streaming -------------------------------------------------------------------------


@contextlib.contextmanager
def open_json_bytes(path: str | Path) -> Iterator[IO[bytes] | gzip.GzipFile]:
    """The JSON bytes of ``path``: plain, gzip, or the one ``.json`` member of a zip (sniffed, not by name)."""
    path = Path(path)
    try:
        with path.open("rb") as raw:
            magic = raw.read(4)
    except OSError as exc:
        raise CladebenchError(f"cannot read {path}: {exc.strerror or exc}") from None
    if magic[:2] == b"\x1f\x8b":
        with gzip.open(path, "rb") as stream:
            yield stream
    elif magic == b"PK\x03\x04":
        with zipfile.ZipFile(path) as archive:
            members = [m for m in archive.namelist() if m.lower().endswith(".json")]
            if len(members) != 1:
                raise CladebenchError(f"{path}: a zip of metadata must hold exactly one .json file; it holds "
                                      f"{members or archive.namelist()[:5]}")
            with archive.open(members[0]) as stream:
                yield stream
    else:
        with path.open("rb") as stream:
            yield stream


def stream_items(path: str | Path, prefix: str) -> Generator[object, None, None]:
    """The values under ``prefix`` (ijson's prefix: ``images.item`` for each element of the top-level ``images``),
    one at a time; numbers with a fraction come as floats. Malformed JSON is an error naming the file."""
    import ijson

    with open_json_bytes(path) as stream:
        try:
            yield from ijson.items(stream, prefix, use_float=True)
        except ijson.JSONError as exc:
            raise CladebenchError(f"{path}: not valid JSON ({one_line(exc)})") from None
        except (OSError, EOFError, zipfile.BadZipFile, gzip.BadGzipFile) as exc:
            raise CladebenchError(f"{path}: cannot be read to the end ({one_line(exc)})") from None


def one_line(error: BaseException) -> str:
    """An error's message on one line: yajl's parse errors run over three (the message, the text, a caret)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def has_array(path: str | Path, key: str) -> bool:
    """Whether the top-level object has ``key`` holding an array (read only as far as that key)."""
    import ijson

    with open_json_bytes(path) as stream:
        try:
            events = ijson.parse(stream)
            for prefix, event, _ in events:
                if prefix == key and event != "map_key":
                    return event == "start_array"
        except ijson.JSONError as exc:
            raise CladebenchError(f"{path}: not valid JSON ({one_line(exc)})") from None
    return False


def require_array(path: str | Path, key: str, what: str) -> None:
    """A :class:`SchemaError` unless the top-level ``key`` is an array (called when no item of it was read: an
    empty array is allowed, a missing or mistyped one is a file of another format)."""
    if not has_array(path, key):
        raise SchemaError(f"{path}: no top-level '{key}' array; {what}")


def stream_records(path: str | Path, key: str, noun: str, bad: BadRecords, missing: str | None, *,
                   empty_allowed: bool = True) -> Iterator[Mapping[str, object]]:
    """Each object of the top-level ``key`` array, in file order: an element that is not an object is counted as
    ``<noun>_not_an_object`` and skipped. When the array had no element at all, ``missing`` (where the format keeps
    them) makes it a :class:`SchemaError`: a file without the array (:func:`require_array`), or, unless
    ``empty_allowed``, also an empty one. With ``missing`` None nothing is required (nothing was asked for)."""
    seen_any = False
    for record in stream_items(path, f"{key}.item"):
        seen_any = True
        if not isinstance(record, Mapping):
            bad.add(f"{noun}_not_an_object", record)
            continue
        yield record
    if not seen_any and missing is not None:
        if not empty_allowed:
            raise SchemaError(f"{path}: no {key}; {missing}")
        require_array(path, key, missing)


def first_item(path: str | Path, prefix: str) -> object:
    """The first value under ``prefix`` (a top-level object such as ``info``), or None when there is none."""
    items = stream_items(path, prefix)
    try:
        return next(items, None)
    finally:
        items.close()


def as_text_id(value: object) -> str | None:
    """An id as text (``location`` and ``id`` are ints in older collections), or None when absent or not scalar."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, (str, int, float)):
        text = str(value).strip()
        return text or None
    return None


def normalise_path(value: str) -> str:
    """A relative image path compared across files: forward slashes, no leading ``./`` or ``/``."""
    text = value.replace("\\", "/").strip()
    while text.startswith("./"):
        text = text[2:]
    return text.lstrip("/")


def unsafe_path(value: str) -> bool:
    """Whether a normalised relative path could leave the image root (a ``..`` segment) or holds a control
    character (a NUL ends a path early on most systems): such a ``file_name`` is not followed."""
    return ".." in value.split("/") or any(ord(ch) < 32 or ord(ch) == 127 for ch in value)


# --- the three arrays --------------------------------------------------------------------------------


def read_categories(path: str | Path, bad: BadRecords) -> dict[int, str]:
    """Category id -> name; a file without any category is a :class:`SchemaError`."""
    categories: dict[int, str] = {}
    for record in stream_records(path, "categories", "category", bad,
                                 "a COCO Camera Traps file lists them in a top-level 'categories' array",
                                 empty_allowed=False):
        category_id = record.get("id")
        if isinstance(category_id, bool) or not isinstance(category_id, int) or category_id < 0:
            bad.add("category_bad_id", record)
            continue
        name = record.get("name")
        if not isinstance(name, str) or not name.strip():
            bad.add("category_missing_name", record)
            continue
        if category_id in categories:
            bad.add("category_duplicate_id", record)
            continue
        categories[category_id] = name.strip()
    return categories


def labelled_images(path: str | Path, selected: Collection[int], categories: Mapping[int, str],
                    bad: BadRecords) -> dict[str, tuple[str, ...]]:
    """Image id -> the names of its selected categories (in the order first annotated), for every image with an
    annotation of a category in ``selected``. Annotations of other categories are checked and counted, not kept."""
    labels: dict[str, list[str]] = {}
    for record in stream_records(path, "annotations", "annotation", bad,
                                 "a COCO Camera Traps file lists its labels in 'annotations'"):
        image_id = as_text_id(record.get("image_id"))
        if image_id is None:
            bad.add("annotation_missing_image_id", record)
            continue
        category_id = record.get("category_id")
        if isinstance(category_id, bool) or not isinstance(category_id, int):
            bad.add("annotation_bad_category_id", record)
            continue
        if category_id not in categories:
            bad.add("annotation_unknown_category", record)
            continue
        if category_id in selected:
            names = labels.setdefault(image_id, [])
            if categories[category_id] not in names:
                names.append(categories[category_id])
    return {image_id: tuple(names) for image_id, names in labels.items()}


@dataclass(frozen=True)
class CctImage:
    """One image record of a COCO Camera Traps file, with the selected labels it carries."""

    image_id: str
    """The record's ``id``, as text."""
    file_name: str
    """Path relative to the collection's image root (forward slashes)."""
    labels: tuple[str, ...]
    """Names of the selected categories annotated on it."""
    location: str | None = None
    """Camera location (an int in older collections; text here): a sampling unit for splits."""
    seq_id: str | None = None
    """Sequence (burst, event) the image belongs to: the finer sampling unit."""
    datetime: str | None = None
    """Capture time as the file writes it (any format dateutil parses, per the format's note)."""
    frame_num: int | None = None
    """Zero-based index of the image in its sequence."""
    width: int | None = None
    height: int | None = None
    rights_holder: str | None = None
    """Who holds the rights, when the collection says per image."""
    corrupt: bool = False
    """The collection marked the image as failing to load."""


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_images(path: str | Path, wanted: Mapping[str, tuple[str, ...]], bad: BadRecords) -> Iterator[CctImage]:
    """The image records whose id is in ``wanted`` (image id -> selected labels), in file order. A wanted id listed
    twice is counted (``image_duplicate_id``) and the first record kept; malformed records are counted. Records of
    other images are not checked beyond what finding the wanted ones needs: they are not read into memory."""
    found: set[str] = set()
    missing = "a COCO Camera Traps file lists its images in 'images'" if wanted else None
    for record in stream_records(path, "images", "image", bad, missing):
        image_id = as_text_id(record.get("id"))
        if image_id is None:
            bad.add("image_missing_id", record)
            continue
        if image_id not in wanted:
            continue
        file_name = record.get("file_name")
        if not isinstance(file_name, str) or not normalise_path(file_name):
            bad.add("image_missing_file_name", record)
            continue
        if unsafe_path(normalise_path(file_name)):
            bad.add("image_unsafe_file_name", record)
            continue
        if image_id in found:
            bad.add("image_duplicate_id", record)
            continue
        found.add(image_id)
        holder = record.get("rights_holder")
        moment = record.get("datetime")
        yield CctImage(
            image_id=image_id, file_name=normalise_path(file_name), labels=wanted[image_id],
            location=as_text_id(record.get("location")), seq_id=as_text_id(record.get("seq_id")),
            datetime=str(moment) if moment is not None and not isinstance(moment, (dict, list)) else None,
            frame_num=_int_or_none(record.get("frame_num")), width=_int_or_none(record.get("width")),
            height=_int_or_none(record.get("height")),
            rights_holder=holder.strip() or None if isinstance(holder, str) else None,
            corrupt=record.get("corrupt") is True,
        )


def read_description(path: str | Path) -> dict[str, object]:
    """The file's ``info`` object (``version``, ``description``, ...), or ``{}`` when it has none."""
    info = first_item(path, "info")
    return dict(info) if isinstance(info, Mapping) else {}


__all__ = [
    "EXAMPLES_PER_REASON",
    "BadRecords",
    "CctImage",
    "as_text_id",
    "first_item",
    "has_array",
    "labelled_images",
    "normalise_path",
    "one_line",
    "open_json_bytes",
    "read_categories",
    "read_description",
    "read_images",
    "require_array",
    "stream_items",
    "stream_records",
    "unsafe_path",
]
