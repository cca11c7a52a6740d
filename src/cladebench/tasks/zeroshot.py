"""Zero-shot classification: images against the text embeddings of a label set, from cached image embeddings.

The label set is the benchmark's own taxa at a rank (species by default): every distinct lineage
prefix down to that rank among the evaluated rows, so homonyms in different kingdoms stay apart.
Each label becomes a string in a name style (``taxon``, ``sci``, ``com``, ``taxon_com``), filled into
prompt templates and averaged into one unit vector per label (CLIP's construction, cached on disk).
Image vectors come from an ``emb_*`` column written by ``cladebench embed`` with the same model: they
are stored raw and L2-normalised here.

Logits use the model's learned scale (``logit_scale="learned"``) or a fixed number (CLIP_benchmark
uses 100); softmax probabilities at the label rank are rolled up to every higher rank through the
sparse species x taxon membership matrix, so "genus accuracy" means the genus with the most
probability mass, not the genus of the top species.

The task returns per-example predictions; metrics are computed from them (:mod:`cladebench.metrics`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from cladebench import store
from cladebench.errors import CladebenchError, SchemaError, UsageError
from cladebench.metrics import accuracy, balanced_accuracy, bootstrap_ci, top_k_hits
from cladebench.store.embeddings import published_metadata
from cladebench.taxonomy import RANK_COLUMNS, RANKS, Lineage, Rank, membership_matrix

if TYPE_CHECKING:
    import lance

    from cladebench.models import Encoder


@dataclass(frozen=True)
class ZeroShotConfig:
    """How a zero-shot run is set up; every field is recorded in the run record."""

    rank: str = "species"
    """Rank of the labels: the benchmark's taxa at this rank form the label set."""
    name_style: str = "taxon"
    """Label strings: sci, com, taxon, taxon_com or mixed (scientific with common name)."""
    templates: str = "bioclip"
    """Template set (bioclip, photo, openai-imagenet, raw) or one template containing {c}."""
    logit_scale: str = "learned"
    """'learned' (the model's own scale) or a number (CLIP_benchmark uses 100)."""
    column: str | None = None
    """Embedding column with the images' vectors; by default the one whose metadata names the model."""
    where: str | None = None
    """SQL filter selecting the evaluated rows."""
    within: str | None = None
    """Restrict rows and labels to one clade, as RANK=NAME (e.g. class=Aves)."""
    candidates: str | None = None
    """Column with each row's candidate species (a list of scientific names, e.g. cryptic_group): each image
    is classified among its own candidates only, as CrypticBio scores confusion among look-alikes."""
    labels: str | None = None
    """Label set file instead of the benchmark's taxa: a CSV with rank columns (kingdom..species or
    scientific_name), or a text file with one name at --rank per line, resolved against the benchmark."""

    def __post_init__(self) -> None:
        fixed_logit_scale(self.logit_scale)  # NaN, zero, negative or infinite: a usage error before any work


@dataclass(frozen=True)
class LabelSet:
    """The labels of a run: one taxon per label, in a fixed order."""

    rank: Rank
    """Rank of every label."""
    taxa: tuple[tuple[str | None, ...], ...]
    """Each label's taxon as its prefix of names (kingdom .. rank)."""
    lineages: tuple[Lineage, ...]
    """A lineage per label, truncated to the rank (the common name kept at species rank)."""

    def texts(self, style: str) -> list[str]:
        """Label strings in a name style."""
        return [lineage.label(style) for lineage in self.lineages]

    def digest(self, style: str) -> str:
        """SHA-256 of the label strings in order: identifies the label set in provenance."""
        return hashlib.sha256(json.dumps(self.texts(style), ensure_ascii=False).encode()).hexdigest()

    def __len__(self) -> int:
        return len(self.taxa)


def label_set(lineages: Sequence[Lineage], rank: Rank | str) -> LabelSet:
    """Distinct taxa at ``rank`` among ``lineages``, sorted by their names (so the order is reproducible)."""
    rank = Rank.parse(rank)
    chosen: dict[tuple[str | None, ...], Lineage] = {}
    for lineage in lineages:
        if lineage.names[rank] is None:
            continue
        key = lineage.key(rank)
        if key not in chosen:
            kept = lineage if rank == Rank.SPECIES else lineage.truncate(rank)
            chosen[key] = kept
    keys = sorted(chosen, key=lambda k: tuple("" if n is None else n for n in k))
    return LabelSet(rank=rank, taxa=tuple(keys), lineages=tuple(chosen[k] for k in keys))


def _name_at(lineage: Lineage, rank: Rank) -> str | None:
    """How a label file names a taxon: the binomial at species rank, the plain name above."""
    return lineage.scientific_name if rank == Rank.SPECIES else lineage.names[rank]


def label_set_from_file(path: str | Path, rank: Rank | str, benchmark: Sequence[Lineage]) -> LabelSet:
    """A label set read from a file, so a model can be scored against a wider (or narrower) set than the
    benchmark's own taxa; rows whose taxon is not in it are not scored, and are counted.

    A ``.csv``/``.tsv`` holds one label per row with rank columns (the store's names, or Darwin Core's
    ``scientificName``/``class``), so each label has a full lineage and can be rolled up. Any other file
    holds one name per line (``#`` starts a comment): a scientific name at ``rank``, looked up among the
    benchmark's lineages; a name the benchmark lacks has no lineage to render, so it is an error that
    points to the CSV form.
    """
    rank = Rank.parse(rank)
    path = Path(path)
    if path.is_dir():
        raise CladebenchError(f"--labels {path} is a folder; give the label set file")
    if not path.is_file():
        raise CladebenchError(f"label set file not found: {path}")
    text = _read_text(path)  # not UTF-8 is an error naming the line, in either form (pyarrow would read bytes)
    # A name may stand for several taxa (homonyms in different kingdoms): such a name is not resolved by guessing.
    taxa_named: dict[str | None, dict[tuple[str | None, ...], Lineage]] = {}
    for lin in benchmark:
        if lin.names[rank] is not None:
            taxa_named.setdefault(_name_at(lin, rank), {}).setdefault(lin.key(rank), lin)
    known = {name: next(iter(taxa.values())) for name, taxa in taxa_named.items() if len(taxa) == 1}
    ambiguous = {name for name, taxa in taxa_named.items() if len(taxa) > 1}
    if path.suffix.lower() in (".csv", ".tsv"):
        import pyarrow.csv as pacsv

        delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
        try:
            table = pacsv.read_csv(path, parse_options=pacsv.ParseOptions(delimiter=delimiter),
                                   convert_options=pacsv.ConvertOptions(strings_can_be_null=True))
        except pa.ArrowInvalid as exc:
            raise CladebenchError(f"{path}: not a readable CSV: {exc}") from None
        lineages = []
        for number, row in enumerate(table.to_pylist(), start=2):  # line 1 is the header
            try:  # values as read: a column of numbers is refused by name, not turned into 'Genus 24'
                lineage = Lineage.from_row(row)
            except SchemaError as error:
                raise SchemaError(f"{path}: row {number}: {error}") from None
            if lineage.names[rank] is None:
                raise CladebenchError(f"{path}: row {number}: no {rank.column} name (field {rank.column!r} "
                                      "or scientific_name): every label needs a name at the label rank")
            if None in lineage.key(rank):  # higher ranks missing: take them from the benchmark when it knows the name
                lineage = known.get(_name_at(lineage, rank), lineage)
            lineages.append(lineage)
        return label_set(lineages, rank)
    lineages, unknown = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        name = line.split("#", 1)[0].strip()
        if not name:
            continue
        if name in ambiguous:
            raise CladebenchError(f"{path}: line {number}: {name!r} names {len(taxa_named[name])} taxa of the "
                                  "benchmark (homonyms in different clades); give the labels as a CSV with rank "
                                  "columns")
        if name in known:
            lineages.append(known[name])
        else:
            unknown.append(f"line {number}: {name!r}")
    if unknown:
        raise CladebenchError(f"{path}: {len(unknown)} name(s) are not {rank.column} names of the benchmark "
                              f"({', '.join(unknown[:5])}{', ...' if len(unknown) > 5 else ''}); give labels "
                              "outside the benchmark as a CSV with rank columns")
    return label_set(lineages, rank)


def _read_text(path: Path) -> str:
    """A text file's content; bytes that are not UTF-8 are an error naming the line they are on."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise CladebenchError(f"{path}: line {line}: not UTF-8 text (byte {data[exc.start]:#04x} at offset "
                              f"{exc.start}); save the file as UTF-8") from None


def has_direction(vectors: np.ndarray, dtype: type = np.float64) -> np.ndarray:
    """Which rows have a direction (a cosine with anything): a norm, computed in ``dtype``, that is finite and
    greater than zero. All zeros have none; nor has a row whose norm overflows ``dtype`` or holds a NaN."""
    with np.errstate(over="ignore", invalid="ignore"):
        norms = np.linalg.norm(np.asarray(vectors, dtype=dtype), axis=1)
    return np.isfinite(norms) & (norms > 0)


def check_vectors(vectors: np.ndarray, uuids: Sequence[str], column: str) -> None:
    """Refuse image vectors that have no direction: all zero, or so large that their float32 norm overflows.

    Either would be scored as a uniform distribution over the labels (every label tied), whose top
    species and rolled-up kingdom contradict each other; such rows are corrupt, not hard examples.
    """
    vectors = np.asarray(vectors, dtype=np.float32)  # the scores are float32, so is the overflow that matters
    bad = np.flatnonzero(~has_direction(vectors, dtype=np.float32))
    if bad.size:
        row = int(bad[0])
        with np.errstate(over="ignore", invalid="ignore"):
            norm = np.linalg.norm(vectors[row:row + 1], axis=1)[0]
        kind = "all zero" if np.isfinite(norm) else "so large that their length overflows float32"
        raise SchemaError(f"column {column!r}: {bad.size} image vector(s) are {kind} (first uuid={uuids[row]}) "
                          "and cannot be scored (they would tie every label); re-embed those rows or leave them "
                          "out with --where")


def normalize_rows(vectors: np.ndarray) -> np.ndarray:
    """L2-normalise each row (raw embeddings are stored; cosine similarity is used)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row softmax computed in place in the logits' own dtype (float32 here: one matrix, not three)."""
    logits -= logits.max(axis=1, keepdims=True)
    np.exp(logits, out=logits)
    logits /= logits.sum(axis=1, keepdims=True)
    return logits


def classify(image_vectors: np.ndarray, label_vectors: np.ndarray, scale: float,
             allowed: np.ndarray | None = None) -> np.ndarray:
    """Softmax probabilities of ``scale`` x cosine similarity between images and labels.

    ``allowed`` (images x labels, bool) restricts each image to its own candidates: the others get
    probability 0, and the softmax is over the candidates alone.
    """
    logits = normalize_rows(image_vectors) @ normalize_rows(label_vectors).T  # float32
    logits *= np.float32(scale)
    if allowed is not None:
        logits[~allowed] = -np.inf
    return softmax(logits)


def candidate_mask(candidates: Sequence[Sequence[str] | None], labels: LabelSet) -> tuple[np.ndarray, dict[str, int]]:
    """Images x labels mask from each row's list of candidate scientific names (e.g. its cryptic group).

    A row without a list keeps every label; names outside the label set are ignored. Both are counted,
    so a thin candidate list is visible in the record rather than silently easy.
    """
    index = {lin.scientific_name: i for i, lin in enumerate(labels.lineages)}
    mask = np.zeros((len(candidates), len(labels)), dtype=bool)
    counts = {"rows_without_candidates": 0, "candidate_names_outside_label_set": 0, "rows_with_one_candidate": 0}
    for row, names in enumerate(candidates):
        if not names:
            mask[row] = True
            counts["rows_without_candidates"] += 1
            continue
        for name in names:
            j = index.get(name)
            if j is None:
                counts["candidate_names_outside_label_set"] += 1
            else:
                mask[row, j] = True
        if not mask[row].any():
            mask[row] = True
            counts["rows_without_candidates"] += 1
        elif mask[row].sum() == 1:
            counts["rows_with_one_candidate"] += 1
    return mask, counts


def _top(probs: np.ndarray, k: int) -> np.ndarray:
    """Indices of each row's ``k`` highest probabilities, best first, ties toward the lower index (as a stable
    descending sort would give), without sorting whole rows."""
    k = min(k, probs.shape[1])
    if k == probs.shape[1]:
        return np.argsort(-probs, axis=1, kind="stable")
    picked = np.argpartition(-probs, k - 1, axis=1)[:, :k]
    values = np.take_along_axis(probs, picked, axis=1)
    out = np.take_along_axis(picked, np.lexsort((picked, -values), axis=1), axis=1)
    # Where the k-th value is tied with labels left outside, the partition chose among them arbitrarily:
    # those rows (rare with real scores, common with masked candidates) are redone exactly.
    kth = values.min(axis=1, keepdims=True)
    for i in np.flatnonzero(np.count_nonzero(probs >= kth, axis=1) > k):
        candidates = np.flatnonzero(probs[i] >= kth[i])
        out[i] = candidates[np.argsort(-probs[i, candidates], kind="stable")[:k]]
    return out


def column_metadata(dataset: lance.LanceDataset, column: str) -> dict[str, Any]:
    """What is known of an embedding column: its field metadata, else what the publisher's column name says."""
    meta = store.embedding_metadata(dataset.schema.field(column))
    return meta if meta.get("model") else (published_metadata(column) or meta)


def find_embedding_column(dataset: lance.LanceDataset, model_id: str) -> str:
    """The ``emb_*`` column holding ``model_id``'s embeddings; an error that says how to make one."""
    matches = [
        f.name for f in dataset.schema
        if f.name.startswith(store.EMBEDDING_PREFIX) and column_metadata(dataset, f.name).get("model") == model_id
    ]
    if not matches:
        raise CladebenchError(
            f"{dataset.uri} has no embedding column for model {model_id}; run `cladebench embed {dataset.uri} "
            f"--model {model_id}` first (or pass --column)"
        )
    if len(matches) > 1:
        raise CladebenchError(f"several columns hold {model_id} embeddings ({matches}); pass --column")
    return matches[0]


def resolve_embedding_column(dataset: lance.LanceDataset, encoder: Any, column: str | None, *, task: str) -> str:
    """The ``emb_*`` column a task on stored embeddings reads: the one given (checked to be an embedding column
    of the encoder's model, when there is an encoder), else the one holding the encoder's model."""
    if column is None:
        if encoder is None:
            raise CladebenchError(f"{task} needs an embedding column: pass --column, or a model whose embeddings "
                                  "the dataset holds")
        return find_embedding_column(dataset, encoder.model_id)
    if column not in dataset.schema.names:
        raise SchemaError(f"column {column!r} is not in {dataset.uri}")
    if not column.startswith(store.EMBEDDING_PREFIX):
        raise SchemaError(f"column {column!r} is not an embedding column ({store.EMBEDDING_PREFIX}*)")
    model = column_metadata(dataset, column).get("model")
    if encoder is not None and model != encoder.model_id:
        raise CladebenchError(f"column {column!r} holds embeddings of {model}, not of {encoder.model_id}: vectors of "
                              "different models are not comparable, and the run record would name the wrong model")
    return column


def text_image_column(dataset: lance.LanceDataset, encoder: Encoder, column: str | None, *,
                      task: str) -> tuple[str, dict[str, Any]]:
    """The image-embedding column a task compares with the encoder's text vectors, and its metadata: it must
    hold that model's embeddings, at the revision loaded (vectors of different weights are not comparable)."""
    column = resolve_embedding_column(dataset, encoder, column, task=task)
    meta = column_metadata(dataset, column)
    if meta.get("revision") and encoder.revision and meta["revision"] != encoder.revision:
        raise CladebenchError(
            f"column {column!r} was made with revision {meta['revision']} of {encoder.model_id}, but revision "
            f"{encoder.revision} is loaded; re-embed (cladebench embed --overwrite) or load that revision"
        )
    return column, meta


def _parse_within(within: str | None) -> tuple[Rank, str] | None:
    if within is None:
        return None
    if "=" not in within:
        raise CladebenchError(f"--within takes RANK=NAME (e.g. class=Aves), got {within!r}")
    rank, name = within.split("=", 1)
    return Rank.parse(rank.strip()), name.strip()


def fixed_logit_scale(value: str) -> float | None:
    """The number a ``--logit-scale`` value names (None for 'learned'); anything but a positive finite number is
    a :class:`UsageError`: NaN makes every probability NaN, zero or a negative scale makes them uniform or
    inverted, and infinity turns the softmax into NaN."""
    if value == "learned":
        return None
    try:
        scale = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"--logit-scale must be 'learned' or a positive number, got {value!r}") from None
    if not math.isfinite(scale) or scale <= 0:
        raise UsageError(f"--logit-scale must be 'learned' or a positive finite number, got {value!r}")
    return scale


def logit_scale_of(config: Any, encoder: Encoder) -> float:
    """The logit scale a config asks for (its ``logit_scale`` field): the encoder's learned one, or a number."""
    fixed = fixed_logit_scale(config.logit_scale)
    if fixed is not None:
        return fixed
    learned = float(encoder.logit_scale)
    if not math.isfinite(learned) or learned <= 0:
        raise CladebenchError(f"the model's learned logit scale is {learned}, not a positive finite number; pass "
                              "--logit-scale NUMBER (CLIP_benchmark uses 100)")
    return learned


def _check_candidates_column(dataset: lance.LanceDataset, name: str) -> None:
    """``--candidates`` names a column of lists of scientific names (one list per row)."""
    if name not in dataset.schema.names:
        raise SchemaError(f"--candidates {name!r}: no such column in {dataset.uri}")
    kind = dataset.schema.field(name).type
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind)) or not (
            pa.types.is_string(kind.value_type) or pa.types.is_large_string(kind.value_type)):
        raise UsageError(f"--candidates {name!r} holds {kind}, not a list of scientific names per row (as "
                         "cryptic_group: the species and its look-alikes)")


@dataclass(frozen=True)
class Predictions:
    """Per-example predictions of a run, plus what is needed to interpret them."""

    table: pa.Table
    """One row per example: uuid, true and predicted labels, hits at every scored rank."""
    labels: list[str]
    """Label strings in label-set order."""
    info: dict[str, Any]
    """Task settings and provenance gathered while predicting (column, model, scale, label set digest...)."""


def zero_shot(dataset: lance.LanceDataset, encoder: Encoder, config: ZeroShotConfig) -> Predictions:
    """Run zero-shot classification over the dataset's rows with embeddings; see the module docstring."""
    from cladebench.embed import valid_embeddings
    from cladebench.models import class_text_embeddings

    rank = Rank.parse(config.rank)
    column, meta = text_image_column(dataset, encoder, config.column, task="zero-shot")
    if config.candidates:
        _check_candidates_column(dataset, config.candidates)
    # Whatever naming columns the dataset has (published tables differ): ranks, common and scientific name.
    naming = [c for c in (*RANK_COLUMNS, "scientific_name", "common_name") if c in dataset.schema.names]
    wanted = list(dict.fromkeys(("uuid", *naming, *((config.candidates,) if config.candidates else ()))))
    rows, image_vectors = valid_embeddings(dataset, column, where=config.where, columns=wanted,
                                           dim=getattr(encoder, "dim", None))
    lineages = [Lineage.from_row(r) for r in rows.select(naming).to_pylist()]
    check_vectors(image_vectors, rows.column("uuid").to_pylist(), column)
    within = _parse_within(config.within)
    if within is not None:
        keep = np.array([lin.names[within[0]] == within[1] for lin in lineages], dtype=bool)
        if not keep.any():
            raise CladebenchError(f"no evaluated row has {within[0].column} = {within[1]!r}")
        rows, image_vectors = rows.filter(pa.array(keep)), image_vectors[keep]
        lineages = [lin for lin, k in zip(lineages, keep, strict=True) if k]
    if not lineages:
        raise CladebenchError(f"no rows with embeddings in {column!r} match the filter {config.where!r}")
    labels = label_set_from_file(config.labels, rank, lineages) if config.labels else label_set(lineages, rank)
    if len(labels) < 2:
        raise CladebenchError(f"zero-shot needs at least 2 labels at rank {rank.column}; found {len(labels)}")
    texts = labels.texts(config.name_style)
    label_vectors = class_text_embeddings(encoder, texts, config.templates)
    scale = logit_scale_of(config, encoder)
    allowed, candidate_counts = None, None
    if config.candidates:
        if rank != Rank.SPECIES:
            raise CladebenchError("--candidates lists species, so it needs --rank species")
        allowed, candidate_counts = candidate_mask(rows.column(config.candidates).to_pylist(), labels)
    probs = classify(image_vectors, label_vectors, scale, allowed)

    index = {key: i for i, key in enumerate(labels.taxa)}
    targets = np.array([index.get(lin.key(rank), -1) if lin.names[rank] else -1 for lin in lineages])
    order = _top(probs, 5)
    reachable = (np.ones(len(targets), dtype=bool) if allowed is None
                 else allowed[np.arange(len(targets)), np.maximum(targets, 0)])
    columns: dict[str, Any] = {
        "uuid": rows.column("uuid"),
        "true_label": [texts[t] if t >= 0 else None for t in targets],
        "pred_label": [texts[o[0]] for o in order],
        "top5_labels": [[texts[j] for j in o] for o in order],
        "top5_probs": [[float(probs[i, j]) for j in o] for i, o in enumerate(order)],
        "true_prob": [float(probs[i, t]) if t >= 0 else None for i, t in enumerate(targets)],
        "scored": targets >= 0,
        # With --candidates, a true label outside the row's candidates (probability 0) is never a hit.
        "correct_top1": top_k_hits(probs, targets, 1) & reachable,
        "correct_top5": top_k_hits(probs, targets, 5) & reachable,
    }
    scored_ranks = [rank.column]
    for higher in RANKS[:rank]:
        membership = membership_matrix(labels.lineages, higher)
        rolled = membership.roll_up(probs)
        taxon_index = {key: j for j, key in enumerate(membership.taxa)}
        true_taxa = np.array([taxon_index.get(lin.key(higher), -1) if lin.names[higher] else -1 for lin in lineages])
        predicted = rolled.argmax(axis=1)
        columns[f"pred_{higher.column}"] = [membership.labels[j] for j in predicted]
        columns[f"correct_{higher.column}"] = (predicted == true_taxa) & (true_taxa >= 0)
        columns[f"scored_{higher.column}"] = true_taxa >= 0
        scored_ranks.append(higher.column)
    table = pa.table(columns)
    info = {
        "column": column,
        "embedding_metadata": meta,
        "rank": rank.column,
        "scored_ranks": scored_ranks,
        "name_style": config.name_style,
        "templates": config.templates,
        "logit_scale": scale,
        "logit_scale_source": "learned" if config.logit_scale == "learned" else "fixed",
        "label_set": {"rank": rank.column, "size": len(labels), "sha256": labels.digest(config.name_style),
                      "source": config.labels or "the benchmark's taxa", "unscored_rows": int((targets < 0).sum())},
        "within": config.within,
        "where": config.where,
        "candidates": None if config.candidates is None else {
            "column": config.candidates, **candidate_counts,
            "rows_whose_truth_is_not_a_candidate": int(((targets >= 0) & ~reachable).sum())},
    }
    if rank == Rank.SPECIES:
        inspection = genus_only_inspection(rows.column("uuid").to_pylist(), lineages, probs, labels, texts)
        if inspection is not None:
            info["inspection"] = inspection
    return Predictions(table=table, labels=texts, info=info)


def genus_only_inspection(uuids: Sequence[str], lineages: Sequence[Lineage], probs: np.ndarray, labels: LabelSet,
                          texts: Sequence[str], *, review: int = 20) -> dict[str, Any] | None:
    """What a person needs to look at for rows labelled only to genus (camera-trap Peromyscus).

    Such rows have no species truth, so they are never scored for species accuracy; instead: how the
    model spreads them over species, how often its top species lies in the labelled genus, and the
    ``review`` images it is least sure of (lowest top probability), for an expert to identify.
    """
    genus_only = np.array([lin.names[Rank.SPECIES] is None and lin.names[Rank.GENUS] is not None
                           for lin in lineages], dtype=bool)
    if not genus_only.any():
        return None
    rows = np.flatnonzero(genus_only)
    top = probs[rows].argmax(axis=1)
    top_prob = probs[rows, top]
    same_genus = np.array([labels.lineages[t].names[Rank.GENUS] == lineages[r].names[Rank.GENUS]
                           for r, t in zip(rows, top, strict=True)], dtype=bool)
    counts: dict[str, int] = {}
    for t in top:
        counts[texts[t]] = counts.get(texts[t], 0) + 1
    least = np.argsort(top_prob, kind="stable")[:review]
    return {
        "genus_only_rows": int(rows.size),
        "predicted_species": dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
        "predicted_genus_is_labelled_genus": accuracy(same_genus).to_dict(),
        "least_certain": [{"uuid": uuids[rows[i]], "genus": lineages[rows[i]].names[Rank.GENUS],
                           "predicted": texts[top[i]], "probability": float(top_prob[i])} for i in least],
    }


BALANCED_ACCURACY_RESAMPLES = 2000
"""Bootstrap resamples for the balanced-accuracy interval (seeded, so a rerun gives the same interval)."""


def zero_shot_metrics(predictions: Predictions) -> dict[str, dict[str, Any]]:
    """top-1 and top-5 at the label rank and rolled-up top-1 at every higher rank, with Wilson intervals.

    Only examples whose true taxon is in the label set at that rank are scored; the count is reported.
    """
    table = predictions.table
    scored = np.asarray(table.column("scored"), dtype=bool)
    rank = predictions.info["rank"]
    metrics = {
        f"top1_{rank}": accuracy(np.asarray(table.column("correct_top1"))[scored]).to_dict(),
        f"top5_{rank}": accuracy(np.asarray(table.column("correct_top5"))[scored]).to_dict(),
    }
    if scored.sum() > 1:
        # Balanced accuracy: long-tailed test sets let common species dominate top-1; the interval is a
        # percentile bootstrap over images (not binomial: the statistic is a mean of per-class recalls).
        labels = np.asarray(table.column("true_label").to_pylist() + table.column("pred_label").to_pylist(),
                            dtype=object)
        codes = np.unique(labels.astype(str), return_inverse=True)[1]
        truth, predicted = codes[: table.num_rows][scored], codes[table.num_rows:][scored]
        metrics[f"balanced_accuracy_{rank}"] = bootstrap_ci(
            lambda w: balanced_accuracy(truth, predicted, weights=w), n_examples=int(scored.sum()),
            n_resamples=BALANCED_ACCURACY_RESAMPLES).to_dict()
    for higher in predictions.info["scored_ranks"][1:]:
        mask = np.asarray(table.column(f"scored_{higher}"), dtype=bool)
        metrics[f"top1_{higher}"] = accuracy(np.asarray(table.column(f"correct_{higher}"))[mask]).to_dict()
    return metrics
