"""MegaDetector batch output, read as a stream: each wanted image's detections, and which detector made them.

The format (``megadetector-output-format.md`` of the MegaDetector repository, "MegaDetector output format") is one
JSON object: ``info`` (``format_version`` required, a string-formatted float; optionally ``detector``, the model's
file name such as ``md_v5a.0.0.pt``, and ``detector_metadata`` with ``megadetector_version`` and suggested
thresholds), ``detection_categories`` (required: string ids such as ``"1"`` -> names, by convention ``animal``,
``person``, ``vehicle``), and ``images``: each with ``file`` (a path relative to the image root, forward or back
slashes) and either ``detections`` (a list, empty when nothing was found), each ``{"category": "1", "conf":
0.926, "bbox": [x_min, y_min, width, height]}`` with the box normalised to the image size, or ``failure`` (a
string: the image was not processed; ``detections`` is then null or absent). A detection whose category is not in
``detection_categories`` is allowed by the format and "should be treated as no detection"; a file without a
``detector`` is, per the format's note, most likely MegaDetector v4.

A run over a collection lists millions of images; :func:`read_detections` keeps only the files asked for. Records
that break the format are counted in a :class:`~.records.BadRecords` under their
reason (a detection with an unlisted category counts as ``detection_unlisted_category`` and is treated as no
detection, as the format says; a box that is not four numbers inside [0, 1] counts as ``detection_bad_bbox`` and
a confidence that is not a number in [0, 1] as ``detection_bad_conf``, the detection kept for screening). A file
without a top-level ``images`` array is a :class:`SchemaError`, as is one without ``detection_categories``.

Why a module: the camera-trap builder screens images by these detections; the format's rules live here, apart
from the screening policy.

Example:
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> path = Path(tempfile.mkdtemp()) / "md.json"
    >>> _ = path.write_text(json.dumps({
    ...     "info": {"format_version": "1.4", "detector": "md_v5a.0.0.pt"},
    ...     "detection_categories": {"1": "animal", "2": "person", "3": "vehicle"},
    ...     "images": [{"file": "cam1\\\\i1.jpg", "detections": [{"category": "1", "conf": 0.9,
    ...                                                          "bbox": [0.1, 0.2, 0.3, 0.4]}]},
    ...                {"file": "cam1/i2.jpg", "failure": "Failure image access", "detections": None}]}))
    >>> run = read_detector_run(path)
    >>> run.detector, run.version
    ('md_v5a.0.0.pt', 'md_v5a.0.0.pt')
    >>> found = read_detections(path, {"cam1/i1.jpg", "cam1/i2.jpg"}, run, BadRecords())
    >>> found["cam1/i1.jpg"].detections, found["cam1/i2.jpg"].failure
    ((Detection(category='animal', conf=0.9, bbox=(0.1, 0.2, 0.3, 0.4)),), 'Failure image access')
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from cladebench.benchmarks.finegrained.cameratrap.records import BadRecords, first_item, normalise_path, stream_records
from cladebench.errors import SchemaError


@dataclass(frozen=True)
class DetectorRun:
    """What the output's ``info`` and ``detection_categories`` say about the run."""

    format_version: str | None
    """``info.format_version`` (required by the format; None when a file lacks it)."""
    detector: str | None
    """``info.detector``: the model file's name, e.g. ``md_v5a.0.0.pt``; None in old files (MegaDetector v4)."""
    megadetector_version: str | None
    """``info.detector_metadata.megadetector_version``, when given (``v5a.0.1``, ``v1000.0.0-redwood``, ...)."""
    categories: dict[str, str]
    """``detection_categories``: id -> name."""

    @property
    def version(self) -> str:
        """The detector as a card names it: the MegaDetector version, else the model file, else v4 as the format's
        note says of files without one."""
        return self.megadetector_version or self.detector or "MegaDetector v4 (the output names no detector)"

    def as_dict(self) -> dict[str, object]:
        return {"format_version": self.format_version, "detector": self.detector,
                "megadetector_version": self.megadetector_version, "version": self.version,
                "categories": dict(self.categories)}


BOX_SLACK = 1e-3
"""How far past the image's edge a box may reach (x + width, y + height) and still count as normalised: the
detector rounds coordinates to a few decimals."""


@dataclass(frozen=True)
class Detection:
    """One detection: its category's name, its confidence, its normalised box (None when the box was malformed).

    A detection whose ``conf`` is not a number in [0, 1] is kept with ``conf`` None (and counted as
    ``detection_bad_conf``): the screening then treats a person or vehicle with an unreadable confidence as one
    at the threshold, and an animal as none, so a malformed record can drop an image but never keep one."""

    category: str
    conf: float | None
    bbox: tuple[float, float, float, float] | None


@dataclass(frozen=True)
class ImageDetections:
    """An image's entry: its detections, or why the detector did not process it."""

    file: str
    detections: tuple[Detection, ...] = ()
    failure: str | None = None


def _text(value: object) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def read_detector_run(path: str | Path) -> DetectorRun:
    """The output's ``info`` and ``detection_categories``; a file without the latter is a :class:`SchemaError`."""
    info = first_item(path, "info")
    info = info if isinstance(info, Mapping) else {}
    categories = first_item(path, "detection_categories")
    if not isinstance(categories, Mapping) or not categories:
        raise SchemaError(f"{path}: no detection_categories; MegaDetector output maps category ids to names in a "
                          "top-level 'detection_categories' object")
    metadata = info.get("detector_metadata")
    version = _text(metadata.get("megadetector_version")) if isinstance(metadata, Mapping) else None
    format_version = info.get("format_version")
    return DetectorRun(format_version=None if format_version is None else str(format_version),
                       detector=_text(info.get("detector")), megadetector_version=version,
                       categories={str(k): str(v) for k, v in categories.items()})


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _detection(record: object, run: DetectorRun, file: str, bad: BadRecords) -> Detection | None:
    if not isinstance(record, Mapping):
        bad.add("detection_not_an_object", f"{file}: {record!r}")
        return None
    category = record.get("category")
    name = run.categories.get(str(category)) if isinstance(category, (str, int)) else None
    if name is None:
        bad.add("detection_unlisted_category", f"{file}: {record!r}")
        return None
    conf = _number(record.get("conf"))
    if conf is None or not 0.0 <= conf <= 1.0:  # kept, unreadable: see Detection
        bad.add("detection_bad_conf", f"{file}: {record!r}")
        conf = None
    box = record.get("bbox")
    numbers = [_number(v) for v in box] if isinstance(box, list) else []
    bbox = None
    if _normalised_box(numbers):
        bbox = tuple(float(v) for v in numbers if v is not None)
    else:  # kept for screening all the same: a person with a broken box is still a person
        bad.add("detection_bad_bbox", f"{file}: {record!r}")
    return Detection(category=name, conf=conf, bbox=bbox)  # type: ignore[arg-type]


def _normalised_box(numbers: list[float | None]) -> bool:
    """Four numbers ``x_min, y_min, width, height``, each in [0, 1], the box inside the image (up to
    :data:`BOX_SLACK`): the format's boxes are normalised, so anything else was written in pixels or broken."""
    if len(numbers) != 4 or any(v is None for v in numbers):
        return False
    x, y, w, h = (float(v) for v in numbers if v is not None)
    return all(0.0 <= v <= 1.0 for v in (x, y, w, h)) and x + w <= 1.0 + BOX_SLACK and y + h <= 1.0 + BOX_SLACK


def read_detections(path: str | Path, wanted: Collection[str], run: DetectorRun,
                    bad: BadRecords) -> dict[str, ImageDetections]:
    """Normalised file path -> its entry, for the files in ``wanted`` (normalised with
    :func:`~.records.normalise_path`). A wanted file listed twice keeps its first entry
    (``image_duplicate_file``); an entry with neither a detections list nor a failure is counted
    (``image_missing_detections``) and left out, so the image reads as not screened."""
    found: dict[str, ImageDetections] = {}
    for record in stream_records(path, "images", "image", bad,
                                 "MegaDetector output lists every image it was given in 'images'"):
        raw_file = record.get("file")
        if not isinstance(raw_file, str) or not normalise_path(raw_file):
            bad.add("image_missing_file", record)
            continue
        file = normalise_path(raw_file)
        if file not in wanted:
            continue
        if file in found:
            bad.add("image_duplicate_file", file)
            continue
        failure = record.get("failure")
        detections = record.get("detections")
        if failure is not None:
            found[file] = ImageDetections(file, failure=str(failure))
        elif isinstance(detections, list):
            parsed = (_detection(d, run, file, bad) for d in detections)
            found[file] = ImageDetections(file, detections=tuple(d for d in parsed if d is not None))
        else:
            bad.add("image_missing_detections", record)
    return found


__all__ = ["BOX_SLACK", "Detection", "DetectorRun", "ImageDetections", "read_detections", "read_detector_run"]
