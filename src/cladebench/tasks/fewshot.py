"""Few-shot classification on frozen image embeddings: k labelled images per taxon, the rest to classify.

What it measures: how well an embedding space separates the benchmark's taxa when a handful of
labelled examples is all there is, the setting of BioCLIP's and BioBench's few-shot tables. No text
tower is involved, so any ``emb_*`` column can be evaluated, including those of image-only models.

Splits (:func:`few_shot_splits`). For each repetition and each taxon, the taxon's *groups* (the
``source_id`` of iNaturalist-style data, i.e. one observation's photos; or any column) are put in a
seeded random order, and so are the images inside each group; the first ``k`` images of that sequence
are the support set. Every group that lends a support image is then closed: its other images are
neither support nor query, so photos of one organism never straddle the two sides. The query set is
every image of the taxon in an untouched group. Consequences worth knowing:

- exactly ``k`` support images per taxon, and supports are nested across ``k`` within a repetition
  (the 5-shot support extends the 1-shot one), so a curve over ``k`` varies only ``k``;
- a draw is a function of (seed, repetition, taxon label, group values, uuids) only: independent of
  row order and of which other taxa or embedding columns exist, so every column of a dataset is
  scored on identical splits and adding a taxon leaves the others' splits unchanged;
- a taxon is evaluated only when *every* draw is guaranteed a query: the images outside its largest
  group, less ``max(shots) - 1``, must number at least ``min_test_per_class`` (with one image per group:
  at least ``max(shots) + 1`` groups). The rule uses the largest ``k`` for every ``k``, so all shot
  counts classify among the same taxa. Taxa that fail it are skipped and listed with their counts.

Methods (:data:`METHODS`, a registry):

- ``simpleshot``: SimpleShot (Wang et al. 2019, "SimpleShot: Revisiting Nearest-Neighbor
  Classification for Few-Shot Learning") as BioCLIP evaluates it (``src/evaluation/few_shot.py``, whose
  features are L2-normalised when extracted): L2-normalise every stored vector, subtract the mean of the
  normalised support vectors from support and query, L2-normalise again, take each taxon's mean support
  vector as its centroid, predict the nearest centroid by Euclidean distance.
- ``simpleshot-biobench``: the same without the first normalisation, as BioBench's
  ``SimpleShotClassifier`` runs on the features it is given: the raw stored vectors are centred on
  their support mean. The two agree on unit vectors and drift apart as the stored norms spread (raw
  embeddings, e.g. Fine-Grained Challenges'): a long support vector pulls the mean, and after
  centring a vector's direction depends on its length.
- ``linear``: multinomial logistic regression (scikit-learn, L-BFGS) on L2-normalised features, its
  inverse regularisation ``C`` chosen from a grid by stratified cross-validation on the support set
  only; with one shot no image per taxon can be held out, so a fixed ``C`` is used and recorded.
- ``knn``: cosine k-nearest neighbours over the support images (scikit-learn, brute force).

Metrics: per method and ``k``, accuracy on each repetition's queries, averaged over repetitions with
the sample standard deviation and a 95 % Student-t interval over repetitions (the repetitions are the
independent units; query images within one draw are not), and the same for balanced accuracy.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cladebench.config import at_least, positive
from cladebench.errors import CladebenchError, SchemaError, UsageError, unknown_name
from cladebench.metrics import define_metric, mean_std_ci
from cladebench.tasks.common import Predictions, column_metadata, has_direction, label_set, resolve_embedding_column
from cladebench.taxonomy import RANK_COLUMNS, Lineage, Rank

if TYPE_CHECKING:
    import lance

    from cladebench.models import Encoder

LABEL_STYLE = "taxon"
"""Name style of the label strings (the full lineage, so homonyms in different clades stay apart)."""
AUTO_GROUP_KEY = "source_id"
"""Column ``group_key="auto"`` uses when the evaluated rows have values in it (else each image is its own group)."""
MAX_REPETITIONS = 10_000
"""Most seeded splits per shot count: far more than any interval needs (the t-interval is tight at a few
dozen), and a bound, so a typo of many digits is a usage error rather than a run that never ends."""


@dataclass(frozen=True)
class FewShotConfig:
    """How a few-shot run is set up; every field is recorded in the run record."""

    rank: str = "species"
    """Rank of the classes: the benchmark's taxa at this rank are the labels."""
    shots: tuple[int, ...] = (1, 5)
    """Support images per class; each value is a separate evaluation on the same repetitions."""
    repetitions: int = 5
    """Independent random splits per shot count; the interval is taken over them."""
    seed: int = 0
    """Seed of the splits (and nothing else): the same seed gives the same splits for every column."""
    methods: tuple[str, ...] = ("simpleshot", "linear", "knn")
    """Classifiers to run on each split: simpleshot (BioCLIP's protocol: each vector L2-normalised first),
    simpleshot-biobench (BioBench's: raw vectors centred), linear, knn."""
    column: str | None = None
    """Embedding column with the images' vectors; by default the one whose metadata names the model."""
    where: str | None = None
    """SQL filter selecting the evaluated rows."""
    group_key: str = "auto"
    """Column whose equal values are one sampling unit that never straddles support and query: 'auto' (source_id
    when the rows have it, else each image alone), 'uuid', or any column name."""
    knn_k: int = 5
    """Neighbours for knn (capped at the number of support images)."""
    knn_weights: Literal["distance", "uniform"] = "distance"
    """knn votes: 'distance' weighs each neighbour by 1 / cosine distance (so at one shot the nearest wins),
    'uniform' counts votes and breaks ties toward the first label."""
    linear_cs: tuple[float, ...] = (0.01, 0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0)
    """Grid of inverse regularisation strengths C searched by cross-validation for linear."""
    linear_folds: int = 5
    """Most cross-validation folds for linear; fewer when there are fewer shots (one held-out image per class)."""
    linear_fallback_c: float = 1.0
    """C for linear at one shot, where the support set cannot be cross-validated."""
    min_test_per_class: int = 1
    """Fewest query images a class must be guaranteed in every draw to be evaluated."""

    def __post_init__(self) -> None:
        shots = tuple(int(k) for k in self.shots)
        if not shots or min(shots) < 1:
            raise UsageError(f"--shots must be at least 1, got {' '.join(map(str, self.shots)) or 'nothing'}")
        if len(set(shots)) != len(shots):
            raise UsageError(f"--shots lists a value twice: {' '.join(map(str, self.shots))}")
        object.__setattr__(self, "shots", tuple(sorted(shots)))
        object.__setattr__(self, "methods", tuple(self.methods))
        object.__setattr__(self, "linear_cs", tuple(sorted(float(c) for c in self.linear_cs)))
        at_least("--repetitions", self.repetitions, 1)
        if self.repetitions > MAX_REPETITIONS:
            raise UsageError(f"--repetitions must be at most {MAX_REPETITIONS:,}, got {self.repetitions}")
        at_least("--seed", self.seed, 0)
        if not self.methods:
            raise UsageError("--methods is empty; choose from " + ", ".join(METHODS))
        for method in self.methods:
            if method not in METHODS:
                raise unknown_name("few-shot method", method, METHODS)
        at_least("--knn-k", self.knn_k, 1)
        at_least("--linear-folds", self.linear_folds, 2)
        at_least("--min-test-per-class", self.min_test_per_class, 1)
        if not self.linear_cs or not all(math.isfinite(c) and c > 0 for c in self.linear_cs):
            raise UsageError(f"--linear-cs must be positive finite numbers, got {list(self.linear_cs)}")
        positive("--linear-fallback-c", self.linear_fallback_c)


# --- splits ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FewShotSplit:
    """One draw: which rows are support and which are query, for one shot count and repetition."""

    shots: int
    repetition: int
    support: np.ndarray
    """Row indices of the support images: class by class in class order, each class in draw order."""
    query: np.ndarray
    """Row indices of the query images, ascending."""


@dataclass(frozen=True)
class SplitPlan:
    """Every draw of a run, the classes they cover and the classes left out (with why)."""

    splits: tuple[FewShotSplit, ...]
    """One split per (shots, repetition), shots ascending then repetition."""
    classes: tuple[str, ...]
    """The evaluated classes, in label order; class index i is ``classes[i]``."""
    targets: np.ndarray
    """Class index of every row; -1 for rows without a label or of a skipped class."""
    skipped: tuple[dict[str, Any], ...]
    """Classes not evaluated: label, images, groups, largest group and the reason."""
    seed: int
    repetitions: int
    shots: tuple[int, ...]
    min_test_per_class: int
    fingerprint: str
    """SHA-256 over every split's support and query row ids: equal fingerprints mean identical splits."""

    def provenance(self) -> dict[str, Any]:
        """The split's description for a run record (without the sampling unit, which the caller knows)."""
        return {
            "kind": "few-shot: per class, k support images from whole groups in seeded random order; the query is "
                    "the class's images in groups with no support image",
            "seed": self.seed,
            "repetitions": self.repetitions,
            "shots": list(self.shots),
            "min_test_per_class": self.min_test_per_class,
            "classes": len(self.classes),
            "skipped_count": len(self.skipped),
            "skipped_classes": list(self.skipped),
            "fingerprint": self.fingerprint,
        }


def _stable_int(text: str) -> int:
    """64 bits of SHA-256: a seed part that depends on the text alone (Python's hash() is salted per process)."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def _draw_sequence(rows: np.ndarray, groups: Sequence[str], row_ids: Sequence[str],
                   rng: np.random.Generator) -> list[tuple[int, str]]:
    """A class's images as (row, group) in draw order: groups shuffled, then each group's images shuffled.

    Groups are sorted by value and images by row id before shuffling, so the order depends on the
    values only, never on where the rows sit in the dataset.
    """
    members: dict[str, list[int]] = {}
    for row in rows:
        members.setdefault(groups[row], []).append(int(row))
    names = sorted(members)
    sequence: list[tuple[int, str]] = []
    for g in rng.permutation(len(names)):
        group = names[g]
        images = sorted(members[group], key=lambda r: row_ids[r])
        sequence.extend((images[i], group) for i in rng.permutation(len(images)))
    return sequence


def _skip_reason(images: int, groups: int, largest: int, shots: int, min_test: int) -> str | None:
    # Support closes at most (shots - 1) images of whole groups plus one more group, the largest at worst.
    guaranteed_query = images - largest - (shots - 1)
    if guaranteed_query >= min_test:
        return None
    return (f"{images} images in {groups} groups (largest {largest}): a draw of {shots} support images can leave "
            f"fewer than {min_test} query images in untouched groups")


def few_shot_splits(labels: Sequence[str | None], groups: Sequence[str], row_ids: Sequence[str], *,
                    shots: Sequence[int], repetitions: int, seed: int, min_test_per_class: int = 1,
                    classes: Sequence[str] | None = None) -> SplitPlan:
    """Seeded support/query splits over rows, by class, with whole groups on one side (see the module docstring).

    ``labels`` are the rows' class labels (``None``: not evaluated), ``groups`` their sampling units and
    ``row_ids`` stable ids (uuids) that fix the order inside a group. ``classes`` orders the labels
    (default: sorted). Supports are nested across ``shots`` within a repetition.
    """
    n = len(labels)
    if len(groups) != n or len(row_ids) != n:
        raise ValueError(f"labels, groups and row_ids differ in length: {n}, {len(groups)}, {len(row_ids)}")
    shots = tuple(sorted(int(k) for k in shots))
    if not shots or shots[0] < 1:
        raise ValueError(f"shots must be positive, got {shots}")
    rows_of: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        if label is not None:
            rows_of.setdefault(label, []).append(i)
    order = [c for c in classes if c in rows_of] if classes is not None else sorted(rows_of)
    kept: list[str] = []
    skipped: list[dict[str, Any]] = []
    for label in order:
        sizes: dict[str, int] = {}
        for row in rows_of[label]:
            sizes[groups[row]] = sizes.get(groups[row], 0) + 1
        reason = _skip_reason(len(rows_of[label]), len(sizes), max(sizes.values()), shots[-1], min_test_per_class)
        if reason is None:
            kept.append(label)
        else:
            skipped.append({"label": label, "images": len(rows_of[label]), "groups": len(sizes),
                            "largest_group": max(sizes.values()), "reason": reason})
    targets = np.full(n, -1, dtype=np.int64)
    for index, label in enumerate(kept):
        targets[rows_of[label]] = index

    per_split: dict[tuple[int, int], tuple[list[int], list[int]]] = {(k, r): ([], []) for k in shots
                                                                       for r in range(repetitions)}
    for r in range(repetitions):
        for label in kept:
            rng = np.random.default_rng([seed, r, _stable_int(label)])
            sequence = _draw_sequence(np.asarray(rows_of[label]), groups, row_ids, rng)
            for k in shots:
                closed = {group for _, group in sequence[:k]}
                support, query = per_split[(k, r)]
                support.extend(row for row, _ in sequence[:k])
                query.extend(row for row, group in sequence if group not in closed)
    splits = tuple(
        FewShotSplit(shots=k, repetition=r, support=np.asarray(per_split[(k, r)][0], dtype=np.int64),
                     query=np.sort(np.asarray(per_split[(k, r)][1], dtype=np.int64)))
        for k in shots for r in range(repetitions)
    )
    return SplitPlan(splits=splits, classes=tuple(kept), targets=targets, skipped=tuple(skipped), seed=seed,
                     repetitions=repetitions, shots=shots, min_test_per_class=min_test_per_class,
                     fingerprint=_splits_fingerprint(splits, row_ids))


def _splits_fingerprint(splits: Sequence[FewShotSplit], row_ids: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for split in splits:
        for role, rows in (("support", split.support), ("query", split.query)):
            for row_id in sorted(row_ids[i] for i in rows):
                digest.update(f"{split.shots}\t{split.repetition}\t{role}\t{row_id}\n".encode())
    return digest.hexdigest()


# --- methods ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MethodOutput:
    """A method's predictions on one split and what it chose while fitting (e.g. C)."""

    predicted: np.ndarray
    """Class index per query row."""
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FewShotMethod:
    """A registered classifier: fit on the support set, predict the query set."""

    name: str
    fit_predict: Callable[[np.ndarray, np.ndarray, np.ndarray, FewShotConfig], MethodOutput]
    """``(support vectors, support class indices 0..C-1, query vectors, config) -> MethodOutput``."""
    definition: str
    """What the method computes, for the metric definitions."""


METHODS: dict[str, FewShotMethod] = {}
"""Registry of few-shot classifiers: name -> method."""


def few_shot_method(name: str, definition: str) -> Callable[[Callable[..., MethodOutput]], Callable[..., MethodOutput]]:
    """Register a classifier under ``name`` (decorator)."""

    def register(function: Callable[..., MethodOutput]) -> Callable[..., MethodOutput]:
        METHODS[name] = FewShotMethod(name=name, fit_predict=function, definition=definition)
        return function

    return register


def _unit_rows(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def _nearest_centroid(query: np.ndarray, centroids: np.ndarray, chunk: int = 8192) -> np.ndarray:
    """Index of the nearest centroid by Euclidean distance, in chunks so memory stays flat on many queries."""
    squared = (centroids * centroids).sum(axis=1)
    out = np.empty(len(query), dtype=np.int64)
    for start in range(0, len(query), chunk):
        block = query[start:start + chunk]
        # ||q - c||^2 = ||q||^2 - 2 q.c + ||c||^2; the first term is the same for every centroid.
        out[start:start + chunk] = np.argmin(squared[None, :] - 2.0 * block @ centroids.T, axis=1)
    return out


def _cl2n_nearest_centroid(support: np.ndarray, targets: np.ndarray, query: np.ndarray) -> np.ndarray:
    """SimpleShot's CL2N nearest centroid on the vectors as given: centre on the support mean (no query statistic
    is used), L2-normalise, nearest class mean of the support by Euclidean distance (ties: the first class)."""
    mean = support.mean(axis=0, keepdims=True)
    centred_support = _unit_rows(support - mean)
    centred_query = _unit_rows(query - mean)
    n_classes = int(targets.max()) + 1
    centroids = np.zeros((n_classes, support.shape[1]))
    np.add.at(centroids, targets, centred_support)
    centroids /= np.bincount(targets, minlength=n_classes)[:, None]
    return _nearest_centroid(centred_query, centroids)


SIMPLESHOT_PROTOCOLS: dict[str, str] = {
    "simpleshot": "bioclip",
    "simpleshot-biobench": "biobench",
}
"""SimpleShot method name -> the peer protocol it follows (recorded in the run's method settings)."""


@few_shot_method("simpleshot", "SimpleShot as BioCLIP evaluates it (protocol 'bioclip'): L2-normalise every vector, "
                               "subtract the mean of the normalised support vectors, L2-normalise again, predict "
                               "the nearest class centroid (mean support vector) by Euclidean distance; ties go to "
                               "the first class in label order (BioCLIP's argpartition leaves them unspecified)")
def simpleshot(support: np.ndarray, targets: np.ndarray, query: np.ndarray, config: FewShotConfig) -> MethodOutput:
    """BioCLIP's protocol: its features are L2-normalised at extraction, then CL2N and nearest centroid."""
    support = _unit_rows(np.asarray(support, dtype=np.float64))
    query = _unit_rows(np.asarray(query, dtype=np.float64))
    return MethodOutput(predicted=_cl2n_nearest_centroid(support, targets, query))


@few_shot_method("simpleshot-biobench", "SimpleShot as BioBench runs it on raw features (protocol 'biobench'): "
                                        "subtract the support mean from the stored vectors as they are, "
                                        "L2-normalise, predict the nearest class centroid (mean normalised support "
                                        "vector) by Euclidean distance; ties go to the first class in label order")
def simpleshot_biobench(support: np.ndarray, targets: np.ndarray, query: np.ndarray,
                        config: FewShotConfig) -> MethodOutput:
    """BioBench's ``SimpleShotClassifier``: CL2N and nearest centroid on the raw stored vectors."""
    return MethodOutput(predicted=_cl2n_nearest_centroid(np.asarray(support, dtype=np.float64), targets,
                                                         np.asarray(query, dtype=np.float64)))


@contextlib.contextmanager
def _expected_fit_warnings() -> Iterator[None]:
    """Silence what few-shot fitting always triggers and records itself: non-convergence (kept in
    ``converged``) and scikit-learn's "more classes than half the samples" (true by design at 1-2 shots)."""
    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.filterwarnings("ignore", message="The number of unique classes is greater than 50%")
        yield


def choose_c(support: np.ndarray, targets: np.ndarray, cs: Sequence[float], folds: int,
             max_iter: int = 1000) -> tuple[float, dict[float, float]]:
    """The C with the best mean accuracy over stratified folds of the support set (ties: the smaller C).

    Folds are consecutive per class (no shuffle): the support order is already a random draw, so
    the folds are random and need no seed of their own. Only support images are ever seen.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold

    scores: dict[float, float] = {}
    splitter = StratifiedKFold(n_splits=folds)
    for c in sorted(cs):
        fold_scores = []
        for train, held_out in splitter.split(support, targets):
            with _expected_fit_warnings():
                model = LogisticRegression(C=c, max_iter=max_iter).fit(support[train], targets[train])
            fold_scores.append(float(np.mean(model.predict(support[held_out]) == targets[held_out])))
        scores[c] = float(np.mean(fold_scores))
    best = max(scores.values())
    return next(c for c in sorted(scores) if scores[c] == best), scores


@few_shot_method("linear", "multinomial logistic regression on L2-normalised features, C chosen by stratified "
                           "cross-validation on the support images only (a fixed C at one shot)")
def linear_probe(support: np.ndarray, targets: np.ndarray, query: np.ndarray, config: FewShotConfig) -> MethodOutput:
    """Logistic regression whose C comes from the support set alone; the choice is returned in ``details``."""
    from sklearn.linear_model import LogisticRegression

    max_iter = 1000
    support = _unit_rows(np.asarray(support, dtype=np.float64))
    folds = min(config.linear_folds, int(np.bincount(targets).min()))
    if folds >= 2:
        c, scores = choose_c(support, targets, config.linear_cs, folds, max_iter)
        details: dict[str, Any] = {"C": c, "chosen_by": "cross-validation", "cv_folds": folds,
                                   "cv_accuracy": {str(k): v for k, v in scores.items()}}
    else:
        c = config.linear_fallback_c
        details = {"C": c, "chosen_by": "fixed: one support image per class leaves nothing to hold out",
                   "cv_folds": 0, "cv_accuracy": {}}
    with _expected_fit_warnings():
        model = LogisticRegression(C=c, max_iter=max_iter).fit(support, targets)
    details["converged"] = bool(np.all(np.asarray(model.n_iter_) < max_iter))
    predicted = model.predict(_unit_rows(np.asarray(query, dtype=np.float64)))
    return MethodOutput(predicted=np.asarray(predicted, dtype=np.int64), details=details)


@few_shot_method("knn", "cosine k-nearest neighbours among the support images (k and the vote weighting are in the "
                        "run's info)")
def knn(support: np.ndarray, targets: np.ndarray, query: np.ndarray, config: FewShotConfig) -> MethodOutput:
    """Cosine kNN by brute force (exact, and fast enough at few-shot support sizes)."""
    from sklearn.neighbors import KNeighborsClassifier

    k = min(config.knn_k, len(support))
    model = KNeighborsClassifier(n_neighbors=k, metric="cosine", algorithm="brute", weights=config.knn_weights)
    with _expected_fit_warnings():
        model.fit(np.asarray(support, dtype=np.float64), targets)
    predicted = model.predict(np.asarray(query, dtype=np.float64))
    return MethodOutput(predicted=np.asarray(predicted, dtype=np.int64))


# --- rows ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LabelledRows:
    """The evaluated rows: ids, class labels, sampling groups and the vectors of each embedding column."""

    uuids: list[str]
    labels: list[str | None]
    """Class label (name style ``taxon``) per row; ``None`` when the row has no name at the rank."""
    classes: tuple[str, ...]
    """All labels present, in label-set order."""
    groups: list[str]
    """Sampling unit per row (a row without a group value is its own unit)."""
    group_key: str
    """The column the groups came from (``uuid`` when each image is its own unit)."""
    rows_without_group: int
    """Rows whose group value was null and that became their own unit."""
    vectors: dict[str, np.ndarray]
    """Raw vectors per column, rows aligned with ``uuids``."""
    rows_without_direction: int = 0
    """Rows left out because a vector was all zeros (or its norm not finite): SimpleShot's first step, and
    cosine kNN, need a direction, and a zero vector would silently land in the first class."""


def _combined_where(where: str | None, columns: Sequence[str]) -> str | None:
    """The filter plus "every other column has a vector", so all columns are read over the same rows."""
    from cladebench.store import sql_identifier

    parts = [f"({where})"] if where else []
    parts.extend(f"{sql_identifier(c)} IS NOT NULL" for c in columns[1:])
    return " AND ".join(parts) or None


def _resolve_group_key(rows: pa.Table, group_key: str) -> str:
    if group_key != "auto":
        return group_key
    if AUTO_GROUP_KEY in rows.column_names and rows.column(AUTO_GROUP_KEY).null_count < rows.num_rows:
        return AUTO_GROUP_KEY
    return "uuid"


def read_labelled_rows(dataset: lance.LanceDataset, columns: Sequence[str], *, rank: Rank | str,
                       where: str | None = None, group_key: str = "auto",
                       keep_without_direction: bool = False) -> LabelledRows:
    """Rows with a vector in every one of ``columns`` (and matching ``where``), with labels and groups.

    Rows whose vector has no direction (all zeros, or a norm that is not finite) are left out and counted in
    ``rows_without_direction``, unless ``keep_without_direction`` (for a caller that lists them itself).
    """
    from cladebench.store.embeddings import valid_embeddings

    names = dataset.schema.names
    for column in columns:
        if column not in names:
            raise SchemaError(f"column {column!r} is not in {dataset.uri}")
    if group_key not in ("auto", "uuid") and group_key not in names:
        raise SchemaError(f"group_key {group_key!r} is not a column of {dataset.uri}")
    wanted = ["uuid", *(c for c in (*RANK_COLUMNS, "scientific_name") if c in names)]
    if group_key not in ("auto", "uuid") and group_key not in wanted:
        wanted.append(group_key)
    if group_key == "auto" and AUTO_GROUP_KEY in names:
        wanted.append(AUTO_GROUP_KEY)
    shared_where = _combined_where(where, columns)
    rows, first = valid_embeddings(dataset, columns[0], where=shared_where, columns=tuple(wanted))
    vectors = {columns[0]: first}
    uuids = rows.column("uuid").to_pylist()
    for column in columns[1:]:
        other_rows, other = valid_embeddings(dataset, column, where=_combined_where(where, [column, *columns]),
                                             columns=("uuid",))
        if other_rows.column("uuid").to_pylist() != uuids:
            raise CladebenchError(f"columns {columns[0]!r} and {column!r} were read in different row orders")
        vectors[column] = other

    directed = np.ones(rows.num_rows, dtype=bool)
    for array in () if keep_without_direction else vectors.values():
        directed &= has_direction(array)
    without_direction = int((~directed).sum())
    if without_direction:
        keep = np.flatnonzero(directed)
        rows = rows.take(pa.array(keep))
        vectors = {c: array[keep] for c, array in vectors.items()}
        uuids = rows.column("uuid").to_pylist()
        if not uuids:
            raise CladebenchError(f"no row has a usable vector in {', '.join(map(repr, columns))}: all "
                                  f"{without_direction:,} are all zeros (a vector without a direction)")

    rank = Rank.parse(rank)
    lineages = [Lineage.from_row(r) for r in rows.select([c for c in wanted if c != "uuid"]).to_pylist()]
    labels_in_order = label_set(lineages, rank)
    texts = labels_in_order.texts(LABEL_STYLE)
    text_of = dict(zip(labels_in_order.taxa, texts, strict=True))
    labels = [text_of[lin.key(rank)] if lin.names[rank] is not None else None for lin in lineages]

    key = _resolve_group_key(rows, group_key)
    values = uuids if key == "uuid" else rows.column(key).to_pylist()
    groups = [f"{key}={v}" if v is not None else f"uuid={u}" for v, u in zip(values, uuids, strict=True)]
    missing = 0 if key == "uuid" else sum(v is None for v in values)
    return LabelledRows(uuids=uuids, labels=labels, classes=tuple(texts), groups=groups, group_key=key,
                        rows_without_group=missing, vectors=vectors, rows_without_direction=without_direction)


def plan_splits(rows: LabelledRows, config: FewShotConfig) -> SplitPlan:
    """The run's splits over ``rows``, with the config's shots, repetitions, seed and query minimum."""
    return few_shot_splits(rows.labels, rows.groups, rows.uuids, shots=config.shots, repetitions=config.repetitions,
                           seed=config.seed, min_test_per_class=config.min_test_per_class, classes=rows.classes)


def predict_splits(vectors: np.ndarray, plan: SplitPlan, uuids: Sequence[str],
                   config: FewShotConfig) -> tuple[pa.Table, dict[str, list[dict[str, Any]]]]:
    """Run every configured method on every split: one row per (method, shots, repetition, query image).

    Returns the prediction table and, per method, what it chose on each split (shots, repetition, details).
    """
    if len(plan.classes) < 2:
        raise CladebenchError(f"few-shot needs at least 2 classes with enough images; {len(plan.classes)} qualify "
                              f"({len(plan.skipped)} skipped: too few groups for {max(plan.shots)} shots)")
    vectors = np.asarray(vectors)
    label_array = np.asarray(plan.classes, dtype=object)
    uuid_array = np.asarray(uuids, dtype=object)
    pieces: list[pa.Table] = []
    chosen: dict[str, list[dict[str, Any]]] = {}
    for method in config.methods:
        fit_predict = METHODS[method].fit_predict
        for split in plan.splits:
            truth = plan.targets[split.query]
            output = fit_predict(vectors[split.support], plan.targets[split.support], vectors[split.query], config)
            n = len(split.query)
            pieces.append(pa.table({
                "uuid": pa.array(uuid_array[split.query], pa.string()),
                "method": pa.array([method] * n, pa.string()),
                "shots": pa.array(np.full(n, split.shots), pa.int32()),
                "repetition": pa.array(np.full(n, split.repetition), pa.int32()),
                "true_label": pa.array(label_array[truth], pa.string()),
                "pred_label": pa.array(label_array[output.predicted], pa.string()),
                "correct": pa.array(output.predicted == truth, pa.bool_()),
            }))
            if output.details:
                chosen.setdefault(method, []).append({"shots": split.shots, "repetition": split.repetition,
                                                      **output.details})
    return pa.concat_tables(pieces), chosen


# --- the task --------------------------------------------------------------------------------------


def _resolve_column(dataset: lance.LanceDataset, encoder: Encoder | None, config: FewShotConfig) -> str:
    return resolve_embedding_column(dataset, encoder, config.column, task="few-shot")


def label_digest(labels: Sequence[str]) -> str:
    """SHA-256 of the label strings in order (the same construction as the zero-shot label set digest)."""
    return hashlib.sha256(json.dumps(list(labels), ensure_ascii=False).encode()).hexdigest()


def few_shot(dataset: lance.LanceDataset, encoder: Encoder | None, config: FewShotConfig) -> Predictions:
    """Run few-shot classification; see the module docstring. ``encoder`` may be None when ``column`` is given."""
    column = _resolve_column(dataset, encoder, config)
    rank = Rank.parse(config.rank)
    rows = read_labelled_rows(dataset, [column], rank=rank, where=config.where, group_key=config.group_key)
    if not rows.uuids:
        raise CladebenchError(f"no rows with embeddings in {column!r} match the filter {config.where!r}")
    plan = plan_splits(rows, config)
    table, chosen = predict_splits(rows.vectors[column], plan, rows.uuids, config)
    info = {
        "column": column,
        "embedding_metadata": column_metadata(dataset, column),
        "rank": rank.column,
        "label_set": {"rank": rank.column, "size": len(plan.classes), "sha256": label_digest(plan.classes),
                      "name_style": LABEL_STYLE, "candidates": len(rows.classes)},
        "where": config.where,
        "rows": {"read": len(rows.uuids), "without_label": sum(label is None for label in rows.labels),
                 "without_direction": rows.rows_without_direction,
                 "in_evaluated_classes": int((plan.targets >= 0).sum())},
        "split": {**plan.provenance(), "sampling_unit": rows.group_key, "group_key": config.group_key,
                  "rows_without_group": rows.rows_without_group},
        "methods": list(config.methods),
        "method_settings": _method_settings(config, chosen),
    }
    return Predictions(table=table, labels=list(plan.classes), info=info)


def _method_settings(config: FewShotConfig, chosen: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    for method in config.methods:
        if method == "knn":
            settings[method] = {"k": config.knn_k, "weights": config.knn_weights, "metric": "cosine"}
        elif method == "linear":
            settings[method] = {"cs": list(config.linear_cs), "max_folds": config.linear_folds,
                                "fallback_c": config.linear_fallback_c, "features": "L2-normalised",
                                "chosen": chosen.get(method, [])}
        elif method in SIMPLESHOT_PROTOCOLS:
            protocol = SIMPLESHOT_PROTOCOLS[method]
            settings[method] = {"protocol": protocol,
                                "input": "L2-normalised vectors" if protocol == "bioclip" else "raw stored vectors",
                                "centre": "support mean", "distance": "euclidean",
                                "definition": METHODS[method].definition}
        else:
            settings[method] = {"definition": METHODS[method].definition}
    return settings


# --- metrics ---------------------------------------------------------------------------------------

T_INTERVAL = ("mean over repetitions; interval: mean +/- t(0.975, N-1) * s / sqrt(N) over the N repetitions "
              "(s the sample standard deviation), clipped to [0, 1]; none when N = 1")


def _mean_t_interval(values: Sequence[float], confidence: float = 0.95) -> dict[str, Any]:
    """:func:`cladebench.metrics.mean_std_ci` as a record entry: clipped to [0, 1] (accuracies), and None
    rather than NaN for a single repetition, so run.json stays strict JSON."""
    estimate = mean_std_ci(np.asarray(values, dtype=np.float64), confidence)
    if estimate.n < 2:
        return {"value": estimate.value, "low": None, "high": None, "n": estimate.n, "std": None,
                "confidence": confidence}
    return {"value": estimate.value, "low": max(0.0, estimate.low), "high": min(1.0, estimate.high), "n": estimate.n,
            "std": estimate.std, "confidence": confidence}


def metric_name(method: str, shots: int, balanced: bool = False) -> str:
    """``simpleshot_5shot`` or ``simpleshot_5shot_balanced``."""
    return f"{method}_{shots}shot" + ("_balanced" if balanced else "")


def _define(method: str, shots: int, balanced: bool) -> str:
    what = METHODS[method].definition if method in METHODS else method
    score = ("balanced accuracy (mean over classes of the share of the class's query images predicted correctly)"
             if balanced else "accuracy (share of query images predicted correctly)")
    return define_metric(metric_name(method, shots, balanced),
                         f"{what}, with {shots} support image(s) per class: {score} per repetition, {T_INTERVAL}")


def few_shot_summary(table: pa.Table, methods: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    """Accuracy and balanced accuracy per method and shot count from a prediction table (see the module docstring)."""
    slim = table.select(["method", "shots", "repetition", "true_label", "correct"])
    slim = slim.set_column(4, "correct", pc.cast(slim.column("correct"), pa.float64()))
    keys = ["method", "shots", "repetition"]
    per_rep = slim.group_by(keys).aggregate([("correct", "mean"), ("correct", "count")])
    per_class = slim.group_by([*keys, "true_label"]).aggregate([("correct", "mean")])
    balanced = per_class.group_by(keys).aggregate([("correct_mean", "mean")])
    accuracy: dict[tuple[str, int], dict[int, tuple[float, int]]] = {}
    for row in per_rep.to_pylist():
        accuracy.setdefault((row["method"], row["shots"]), {})[row["repetition"]] = (row["correct_mean"],
                                                                                     row["correct_count"])
    balanced_of = {(r["method"], r["shots"], r["repetition"]): r["correct_mean_mean"] for r in balanced.to_pylist()}
    order = list(methods) if methods is not None else []
    order += sorted({m for m, _ in accuracy} - set(order))
    metrics: dict[str, dict[str, Any]] = {}
    for method in order:
        for shots in sorted(k for m, k in accuracy if m == method):
            reps = sorted(accuracy[(method, shots)])
            pooled = sum(accuracy[(method, shots)][r][1] for r in reps)
            for is_balanced in (False, True):
                values = [balanced_of[(method, shots, r)] if is_balanced else accuracy[(method, shots)][r][0]
                          for r in reps]
                name = _define(method, shots, is_balanced)
                metrics[name] = {**_mean_t_interval(values), "query_examples": pooled,
                                 "per_repetition": [float(v) for v in values], "interval": T_INTERVAL}
    return metrics


def few_shot_metrics(predictions: Predictions) -> dict[str, dict[str, Any]]:
    """``<method>_<k>shot`` and ``<method>_<k>shot_balanced`` for every method and shot count of the run."""
    return few_shot_summary(predictions.table, predictions.info.get("methods"))


for _method in METHODS.values():
    define_metric(_method.name, f"few-shot {_method.definition}; {T_INTERVAL}")
