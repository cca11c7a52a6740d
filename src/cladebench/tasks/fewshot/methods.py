"""Few-shot classifiers on frozen embeddings, a registry (:data:`METHODS`): SimpleShot (two protocols), linear, kNN.

Why a module of its own: each method fits on a support set and predicts a query set, nothing else; a new
classifier is one decorated function here (:func:`few_shot_method`).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal, Protocol

import numpy as np

from cladebench.registry import Registry
from cladebench.store.embeddings import normalise_rows

if TYPE_CHECKING:
    from sklearn.linear_model import LogisticRegression
    from sklearn.neighbors import KNeighborsClassifier

# --- methods ---------------------------------------------------------------------------------------


class MethodSettings(Protocol):
    """What a method reads of the run's config (:class:`~cladebench.tasks.fewshot.config.FewShotConfig` has it)."""

    @property
    def knn_k(self) -> int: ...
    @property
    def knn_weights(self) -> Literal["distance", "uniform"]: ...
    @property
    def linear_cs(self) -> tuple[float, ...]: ...
    @property
    def linear_folds(self) -> int: ...
    @property
    def linear_fallback_c(self) -> float: ...


@dataclass(frozen=True)
class MethodOutput:
    """A method's predictions on one split and what it chose while fitting (e.g. C)."""

    predicted: np.ndarray
    """Class index per query row."""
    details: dict[str, object] = field(default_factory=dict)
    ranked: np.ndarray | None = None
    """The :data:`RANKED` best classes per query row, best first (the first is :attr:`predicted`), where the method
    scores every class: what hierarchical distance@5 reads."""


RANKED = 5
"""Classes a method ranks per query row (hierarchical distance@5)."""


def _best_first(scores: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """The :data:`RANKED` best columns of each row of ``scores``, best first, ties to the lower column (as argmax and
    argmin break them, so the first is the prediction)."""
    order = np.argsort(-scores if higher_is_better else scores, axis=1, kind="stable")
    return order[:, :RANKED]


@dataclass(frozen=True)
class FewShotMethod:
    """A registered classifier: fit on the support set, predict the query set."""

    name: str
    fit_predict: Callable[[np.ndarray, np.ndarray, np.ndarray, MethodSettings], MethodOutput]
    """``(support vectors, support class indices 0..C-1, query vectors, config) -> MethodOutput``."""
    definition: str
    """What the method computes, for the metric definitions."""


METHODS: Registry[FewShotMethod] = Registry("few-shot method")
"""Registry of few-shot classifiers: name -> method."""


def few_shot_method(name: str, definition: str) -> Callable[[Callable[..., MethodOutput]], Callable[..., MethodOutput]]:
    """Register a classifier under ``name`` (decorator)."""

    def register(function: Callable[..., MethodOutput]) -> Callable[..., MethodOutput]:
        METHODS.add(name, FewShotMethod(name=name, fit_predict=function, definition=definition))
        return function

    return register


def _nearest_centroid(query: np.ndarray, centroids: np.ndarray, chunk: int = 8192) -> tuple[np.ndarray, np.ndarray]:
    """Index of the nearest centroid by Euclidean distance, and the :data:`RANKED` nearest best first, in chunks so
    memory stays flat on many queries."""
    squared = (centroids * centroids).sum(axis=1)
    out = np.empty(len(query), dtype=np.int64)
    ranked = np.empty((len(query), min(RANKED, len(centroids))), dtype=np.int64)
    for start in range(0, len(query), chunk):
        block = query[start:start + chunk]
        # ||q - c||^2 = ||q||^2 - 2 q.c + ||c||^2; the first term is the same for every centroid.
        distances = squared[None, :] - 2.0 * block @ centroids.T
        out[start:start + chunk] = np.argmin(distances, axis=1)
        ranked[start:start + chunk] = _best_first(distances, higher_is_better=False)
    return out, ranked


def _cl2n_nearest_centroid(support: np.ndarray, targets: np.ndarray, query: np.ndarray) -> MethodOutput:
    """SimpleShot's CL2N nearest centroid on the vectors as given: centre on the support mean (no query statistic
    is used), L2-normalise, nearest class mean of the support by Euclidean distance (ties: the first class)."""
    mean = support.mean(axis=0, keepdims=True)
    centred_support = normalise_rows(support - mean, dtype=None)
    centred_query = normalise_rows(query - mean, dtype=None)
    n_classes = int(targets.max()) + 1
    centroids = np.zeros((n_classes, support.shape[1]))
    np.add.at(centroids, targets, centred_support)
    centroids /= np.bincount(targets, minlength=n_classes)[:, None]
    predicted, ranked = _nearest_centroid(centred_query, centroids)
    return MethodOutput(predicted=predicted, ranked=ranked)


SIMPLESHOT_PROTOCOLS: Mapping[str, str] = MappingProxyType({"simpleshot": "bioclip", "simpleshot-biobench": "biobench"})
"""SimpleShot method name -> the peer protocol it follows (recorded in the run's method settings)."""


@few_shot_method("simpleshot", "SimpleShot as BioCLIP evaluates it (protocol 'bioclip'): L2-normalise every vector, "
                               "subtract the mean of the normalised support vectors, L2-normalise again, predict "
                               "the nearest class centroid (mean support vector) by Euclidean distance; ties go to "
                               "the first class in label order (BioCLIP's argpartition leaves them unspecified)")
def simpleshot(support: np.ndarray, targets: np.ndarray, query: np.ndarray, config: MethodSettings) -> MethodOutput:
    """BioCLIP's protocol: its features are L2-normalised at extraction, then CL2N and nearest centroid."""
    support = normalise_rows(support, dtype=np.float64)
    query = normalise_rows(query, dtype=np.float64)
    return _cl2n_nearest_centroid(support, targets, query)


@few_shot_method("simpleshot-biobench", "SimpleShot as BioBench runs it on raw features (protocol 'biobench'): "
                                        "subtract the support mean from the stored vectors as they are, "
                                        "L2-normalise, predict the nearest class centroid (mean normalised support "
                                        "vector) by Euclidean distance; ties go to the first class in label order")
def simpleshot_biobench(support: np.ndarray, targets: np.ndarray, query: np.ndarray,
                        config: MethodSettings) -> MethodOutput:
    """BioBench's ``SimpleShotClassifier``: CL2N and nearest centroid on the raw stored vectors."""
    return _cl2n_nearest_centroid(np.asarray(support, dtype=np.float64), targets, np.asarray(query, dtype=np.float64))


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
def linear_probe(support: np.ndarray, targets: np.ndarray, query: np.ndarray, config: MethodSettings) -> MethodOutput:
    """Logistic regression whose C comes from the support set alone; the choice is returned in ``details``."""
    from sklearn.linear_model import LogisticRegression

    max_iter = 1000
    support = normalise_rows(support, dtype=np.float64)
    folds = min(config.linear_folds, int(np.bincount(targets).min()))
    if folds >= 2:
        c, scores = choose_c(support, targets, config.linear_cs, folds, max_iter)
        details: dict[str, object] = {"C": c, "chosen_by": "cross-validation", "cv_folds": folds,
                                   "cv_accuracy": {str(k): v for k, v in scores.items()}}
    else:
        c = config.linear_fallback_c
        details = {"C": c, "chosen_by": "fixed: one support image per class leaves nothing to hold out",
                   "cv_folds": 0, "cv_accuracy": {}}
    with _expected_fit_warnings():
        model = LogisticRegression(C=c, max_iter=max_iter).fit(support, targets)
    details["converged"] = bool(np.all(np.asarray(model.n_iter_) < max_iter))
    features = normalise_rows(query, dtype=np.float64)
    predicted = model.predict(features)
    return MethodOutput(predicted=np.asarray(predicted, dtype=np.int64), details=details,
                        ranked=_classes_best_first(model, model.predict_proba(features)))


@few_shot_method("knn", "cosine k-nearest neighbours among the support images (k and the vote weighting are in the "
                        "run's info)")
def knn(support: np.ndarray, targets: np.ndarray, query: np.ndarray, config: MethodSettings) -> MethodOutput:
    """Cosine kNN by brute force (exact, and fast enough at few-shot support sizes)."""
    from sklearn.neighbors import KNeighborsClassifier

    k = min(config.knn_k, len(support))
    model = KNeighborsClassifier(n_neighbors=k, metric="cosine", algorithm="brute", weights=config.knn_weights)
    with _expected_fit_warnings():
        model.fit(np.asarray(support, dtype=np.float64), targets)
    features = np.asarray(query, dtype=np.float64)
    predicted = model.predict(features)
    return MethodOutput(predicted=np.asarray(predicted, dtype=np.int64),
                        ranked=_classes_best_first(model, model.predict_proba(features)))


def _classes_best_first(model: LogisticRegression | KNeighborsClassifier, probabilities: np.ndarray) -> np.ndarray:
    """A scikit-learn classifier's :data:`RANKED` most probable classes per row, best first (ties to the lower
    class, as its ``predict`` breaks them), as class indices."""
    return np.asarray(model.classes_, dtype=np.int64)[_best_first(probabilities, higher_is_better=True)]
