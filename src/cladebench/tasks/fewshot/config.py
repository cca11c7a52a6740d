"""How a few-shot run is set up (:class:`FewShotConfig`), checked when it is made.

Why a module of its own: the splits, the methods and the task all read it; it checks method names against
:data:`~cladebench.tasks.fewshot.methods.METHODS`, so a typo fails before any vector is read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Literal

from cladebench.config import at_least, positive
from cladebench.errors import UsageError
from cladebench.tasks.configs import TaskSettings

MAX_REPETITIONS = 10_000
"""Most seeded splits per shot count: far more than any interval needs (the t-interval is tight at a few
dozen), and a bound, so a typo of many digits is a usage error rather than a run that never ends."""


@dataclass(frozen=True)
class FewShotConfig(TaskSettings):
    """How a few-shot run is set up; every field is recorded in the run record."""
    TASK: ClassVar[str] = "fewshot"

    SHOWN: ClassVar[tuple[str, ...]] = ("rank", "shots", "methods", "column")
    """The fields `cladebench eval fewshot --help` lists as options (:data:`cladebench.config.SHOWN`)."""

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
        from cladebench.tasks.fewshot.methods import METHODS  # numpy: `eval fewshot --help` reads this class

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
            METHODS.get_named(method)
        at_least("--knn-k", self.knn_k, 1)
        at_least("--linear-folds", self.linear_folds, 2)
        at_least("--min-test-per-class", self.min_test_per_class, 1)
        if not self.linear_cs or not all(math.isfinite(c) and c > 0 for c in self.linear_cs):
            raise UsageError(f"--linear-cs must be positive finite numbers, got {list(self.linear_cs)}")
        positive("--linear-fallback-c", self.linear_fallback_c)

    def label_rank(self) -> str | None:
        return self.rank

    def shot_counts(self) -> tuple[int, ...]:
        return self.shots

    def group_keys(self) -> dict[str, str]:
        return {"--group-key": self.group_key}
