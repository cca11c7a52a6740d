"""What the tasks share: label sets, embedding-column lookup, vector checks, scoring and the predictions type.

Why a module of its own: zero-shot, few-shot, retrieval, rerank, geo and lineage all read image vectors from an
``emb_*`` column of one model, refuse vectors without a direction, build label sets from the benchmark's
lineages (or a label file), turn cosine similarities into probabilities with a logit scale, check VLM request
settings, and return :class:`Predictions`. One copy of each keeps the tasks from drifting apart (and from
importing each other).
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
from cladebench.config import at_least, positive
from cladebench.errors import CladebenchError, SchemaError, UsageError
from cladebench.store.embeddings import (
    model_spelling,
    normalise_rows,
    published_metadata,
    published_sidecar_path,
    read_published_sidecar,
)
from cladebench.taxonomy import (
    RANK_COLUMNS,
    Lineage,
    Rank,
    distinct_lineages,
    lineages_from_table,
    normalised_name,
    parse_within,
)

if TYPE_CHECKING:
    import lance

    from cladebench.models import Encoder
    from cladebench.tasks.protocols import AsksEndpoint, NamesModel, ScalesLogits, ScoresLabels


MAX_UNUSABLE_SHARE = 0.5
"""Largest share of a model's answers that may be unusable (unscored candidates, unreadable or refused answers) for
metrics still to be reported: beyond it the numbers would measure the failures, not the model, so each metric is
recorded without a value and with the reason."""


@dataclass(frozen=True)
class Predictions:
    """Per-example predictions of a run, plus what is needed to interpret them."""

    table: pa.Table
    """One row per example: uuid, true and predicted labels, hits at every scored rank."""
    labels: list[str]
    """Label strings in label-set order."""
    info: dict[str, Any]
    """Task settings and provenance gathered while predicting (column, model, scale, label set digest...)."""


def label_digest(labels: Sequence[str]) -> str:
    """SHA-256 of the label strings in order (the JSON list): what identifies a label set in a run record."""
    return hashlib.sha256(json.dumps(list(labels), ensure_ascii=False).encode()).hexdigest()


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
        return label_digest(self.texts(style))

    def taxa_digest(self) -> str:
        """SHA-256 of the set's taxa whatever name style their labels are written in: each taxon's names from
        kingdom to the rank, case ignored (as the set is de-duplicated), sorted. Runs of the same taxa under
        scientific and common names share it, so they are paired; runs of other taxa do not, however many labels."""
        taxa = sorted([(name or "").casefold() for name in taxon] for taxon in self.taxa)
        return hashlib.sha256(json.dumps(taxa, ensure_ascii=False).encode()).hexdigest()

    def __len__(self) -> int:
        return len(self.taxa)

    def index_of(self, wanted: Sequence[Lineage] | None = None) -> dict[tuple[str | None, ...], int]:
        """Label index by :meth:`~cladebench.taxonomy.Lineage.match_key` (case ignored), limited to the taxa of
        ``wanted`` when given (a tree-of-life set has a million labels; only the evaluated rows' are looked up)."""
        keys = None if wanted is None else {lin.match_key(self.rank) for lin in distinct_lineages(wanted)
                                            if lin.names[self.rank]}
        names = None if keys is None else {key[-1] for key in keys}
        out: dict[tuple[str | None, ...], int] = {}
        for i, lineage in enumerate(self.lineages):
            if names is not None and (lineage.names[self.rank] or "").casefold() not in names:
                continue  # one name compared first: a million labels cost a million casefolds, not seven
            key = lineage.match_key(self.rank)
            if (keys is None or key in keys) and key not in out:
                out[key] = i
        return out


def label_set(lineages: Sequence[Lineage], rank: Rank | str) -> LabelSet:
    """Distinct taxa at ``rank`` among ``lineages``, sorted by their names (so the order is reproducible).

    Taxa are told apart by :meth:`~cladebench.taxonomy.Lineage.match_key`: two spellings of one taxon that differ
    only in case (or in Unicode composition or spacing, which lineages already normalise) are one label, spelled as
    first seen; rows are matched to labels the same way (:meth:`LabelSet.index_of`)."""
    rank = Rank.parse(rank)
    chosen: dict[tuple[str | None, ...], Lineage] = {}
    for lineage in distinct_lineages(lineages):  # rows repeat their taxa: each looked at once
        if lineage.names[rank] is None:
            continue
        key = lineage.match_key(rank)
        if key not in chosen:
            kept = lineage if rank == Rank.SPECIES else lineage.truncate(rank)
            chosen[key] = kept
    kept_lineages = sorted(chosen.values(), key=lambda lin: tuple("" if n is None else n for n in lin.key(rank)))
    return LabelSet(rank=rank, taxa=tuple(lin.key(rank) for lin in kept_lineages), lineages=tuple(kept_lineages))


@dataclass(frozen=True)
class PlannedLabelSet:
    """A run's label set as the evaluation plan decides it, once, before any model loads: the labels, their strings
    in the run's name style and the hash that identifies them in the run record and its comparability key."""

    labels: LabelSet
    """The labels, in label-set order."""
    texts: tuple[str, ...]
    """Each label's string in the run's name style (what the text tower reads and the predictions name)."""
    sha256: str
    """SHA-256 of :attr:`texts` (:meth:`LabelSet.digest`): computed here and nowhere else."""
    taxa_sha256: str
    """SHA-256 of the taxa whatever their name style (:meth:`LabelSet.taxa_digest`): what comparability pairs on."""

    @classmethod
    def of(cls, labels: LabelSet, name_style: str) -> PlannedLabelSet:
        texts = labels.texts(name_style)
        return cls(labels=labels, texts=tuple(texts), sha256=label_digest(texts), taxa_sha256=labels.taxa_digest())


NAMING_COLUMNS = (*RANK_COLUMNS, "scientific_name", "common_name")
"""The columns a row's taxon is read from (those a dataset has: published tables differ)."""


def selected_label_set(dataset: lance.LanceDataset, *, where: str | None, rank: Rank | str, name_style: str,
                       labels: str | Path | None = None, within: str | None = None) -> PlannedLabelSet:
    """The label set of a run on the benchmark's taxa: every distinct taxon at ``rank`` among the rows ``where``
    selects (in the ``within`` clade), or the label file ``labels`` resolved against them. Decided from the
    selection, not from which rows have a vector: a row whose photo failed to embed does not take its taxon out
    of the label set, so two models' runs on one selection are scored against the same labels."""
    rank = Rank.parse(rank)
    naming = [c for c in NAMING_COLUMNS if c in dataset.schema.names]
    lineages = lineages_from_table(store.read(dataset, columns=naming, where=where))
    if within is not None:
        within_rank, name = parse_within(within)
        lineages = [lin for lin in lineages if lin.names[within_rank] == name]
        if not lineages:
            raise CladebenchError(f"no evaluated row has {within_rank.column} = {name!r}")
    built = label_set_from_file(labels, rank, lineages) if labels else label_set(lineages, rank)
    return PlannedLabelSet.of(built, name_style)


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
        name = normalised_name(line.split("#", 1)[0])  # as lineages spell names
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
    logits = normalise_rows(image_vectors) @ normalise_rows(label_vectors).T  # float32
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


@dataclass(frozen=True)
class LabelScores:
    """Images scored against a label set's texts (:func:`score_labels`), as zero-shot and the geo task's image
    side score them."""

    texts: list[str]
    """Label strings in label-set order (the config's name style)."""
    label_vectors: np.ndarray
    """Text embedding of each label, its templates averaged."""
    scale: float
    """Logit scale applied to the cosine similarities."""
    allowed: np.ndarray | None
    """Images x labels mask of each row's candidates (``--candidates``); None without."""
    candidate_counts: dict[str, int] | None
    """What :func:`candidate_mask` counted; None without candidates."""
    probs: np.ndarray
    """Images x labels softmax probabilities (:func:`classify`)."""


def score_labels(encoder: Encoder, image_vectors: np.ndarray, rows: pa.Table, labels: LabelSet, rank: Rank,
                 config: ScoresLabels) -> LabelScores:
    """Score every image against every label: the labels' texts in ``config.name_style`` through
    ``config.templates``, the config's logit scale, and, with ``config.candidates``, each row restricted to the
    species its candidates column lists (so only at rank species)."""
    from cladebench.models import class_text_embeddings

    texts = labels.texts(config.name_style)
    label_vectors = class_text_embeddings(encoder, texts, config.templates)
    scale = logit_scale_of(config, encoder)
    allowed, candidate_counts = None, None
    if config.candidates:
        if rank != Rank.SPECIES:
            raise CladebenchError("--candidates lists species, so it needs --rank species")
        allowed, candidate_counts = candidate_mask(rows.column(config.candidates).to_pylist(), labels)
    return LabelScores(texts=texts, label_vectors=label_vectors, scale=scale, allowed=allowed,
                       candidate_counts=candidate_counts, probs=classify(image_vectors, label_vectors, scale, allowed))


def column_metadata(dataset: lance.LanceDataset, column: str) -> dict[str, object]:
    """What is known of an embedding column: its field metadata, or, for a published column, the model its name
    stands for with the revision its publisher recorded (field metadata, or the sidecar beside the dataset)."""
    meta = store.embedding_metadata(dataset.schema.field(column))
    sidecar = published_sidecar_path(dataset.uri)
    entry = read_published_sidecar(sidecar).get(column) if sidecar is not None else None
    return published_metadata(column, meta, sidecar_entry=entry) or meta


def find_embedding_column(dataset: lance.LanceDataset, model_id: str) -> str:
    """The ``emb_*`` column holding ``model_id``'s embeddings; an error that says how to make one."""
    matches = [
        f.name for f in dataset.schema
        if f.name.startswith(store.EMBEDDING_PREFIX)
        and model_spelling(str(column_metadata(dataset, f.name).get("model") or "")) == model_spelling(model_id)
    ]
    if not matches:
        raise CladebenchError(
            f"{dataset.uri} has no embedding column for model {model_id}; run `cladebench embed {dataset.uri} "
            f"--model {model_id}` first (or pass --column)"
        )
    if len(matches) > 1:
        raise CladebenchError(f"several columns hold {model_id} embeddings ({matches}); pass --column")
    return matches[0]


def resolve_embedding_column(dataset: lance.LanceDataset, encoder: NamesModel | None, column: str | None, *,
                             task: str) -> str:
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
    if encoder is not None and model_spelling(str(model or "")) != model_spelling(encoder.model_id):
        raise CladebenchError(f"column {column!r} holds embeddings of {model}, not of {encoder.model_id}: vectors of "
                              "different models are not comparable, and the run record would name the wrong model")
    return column


def check_candidates_column(dataset: lance.LanceDataset, name: str) -> None:
    """``--candidates`` names a column of lists of scientific names (one list per row, as CrypticBio's
    cryptic_group: the species and its look-alikes): the one check, before any model loads and in the task."""
    if name not in dataset.schema.names:
        raise SchemaError(f"--candidates {name!r}: no such column in {dataset.uri}")
    kind = dataset.schema.field(name).type
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind)) or not (
            pa.types.is_string(kind.value_type) or pa.types.is_large_string(kind.value_type)):
        raise UsageError(f"--candidates {name!r} holds {kind}, not a list of scientific names per row (as "
                         "cryptic_group: the species and its look-alikes)")


def text_image_column(dataset: lance.LanceDataset, encoder: Encoder, column: str | None, *,
                      task: str) -> tuple[str, dict[str, object]]:
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


def check_vlm_settings(config: AsksEndpoint) -> None:
    """Refuse VLM request settings out of range (``config`` has ``vlm_concurrency``, ``vlm_max_response_bytes``
    and ``vlm_deadline_s``) as usage errors naming the option, before any request is made."""
    at_least("--vlm-concurrency", config.vlm_concurrency, 1)
    at_least("--vlm-max-response-bytes", config.vlm_max_response_bytes, 1)
    positive("--vlm-deadline-s", config.vlm_deadline_s)


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


def logit_scale_of(config: ScalesLogits, encoder: Encoder) -> float:
    """The logit scale a config asks for (its ``logit_scale`` field): the encoder's learned one, or a number.

    The number was checked when the config was made (its ``__post_init__`` calls :func:`fixed_logit_scale`), so it
    is only read here."""
    if config.logit_scale != "learned":
        return float(config.logit_scale)
    learned = float(encoder.logit_scale)
    if not math.isfinite(learned) or learned <= 0:
        raise CladebenchError(f"the model's learned logit scale is {learned}, not a positive finite number; pass "
                              "--logit-scale NUMBER (CLIP_benchmark uses 100)")
    return learned
