"""The configs of the ``export`` verbs, apart from their code: the command line's help reads them without importing
pyarrow, huggingface_hub or mlflow."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cladebench.config import OPTION


@dataclass(frozen=True)
class ModelCardConfig:
    """Write (or update) a Hugging Face model card's model-index from a model's checked results; nothing is
    uploaded (push the card with `huggingface-cli upload`)."""

    runs: tuple[Path, ...]
    """Suite folders, run.json files or the folders holding them."""
    model: str = field(metadata=OPTION)
    """The model whose runs go on the card: as the suite names it, its id, or its runs' label."""
    out_file: Path = field(metadata=OPTION)
    """The card to write (README.md); an existing card is updated, keeping its body and other metadata."""
    name: str | None = None
    """The model's name in the model-index; by default the card's own, else --model."""


@dataclass(frozen=True)
class MlflowConfig:
    """Log each checked run of suites or run records as one MLflow run (params, metrics with interval bounds, tags,
    run.json and its report as artifacts); a run already in the experiment is not logged again."""

    runs: tuple[Path, ...]
    """Suite folders, run.json files or the folders holding them."""
    tracking_uri: str | None = None
    """Where MLflow keeps runs (a server's http(s):// URL, file:PATH, ...); by default $MLFLOW_TRACKING_URI, else
    MLflow's own default."""
    experiment: str = "cladebench"
    """The MLflow experiment the runs go to (created when absent)."""
    model: str | None = None
    """Only the runs of this model (as the suite names it, its id or its runs' label); by default every run."""


@dataclass(frozen=True)
class WandbConfig:
    """Log each checked run of suites or run records as one Weights & Biases run, offline unless $WANDB_MODE says
    otherwise (`wandb sync` uploads later); a run logged before is not logged again."""

    runs: tuple[Path, ...]
    """Suite folders, run.json files or the folders holding them."""
    project: str = "cladebench"
    """The W&B project the runs go to."""
    entity: str | None = None
    """The W&B entity (user or team); by default W&B's own."""
    dir: Path | None = None
    """Where W&B writes its run folders (DIR/wandb/offline-run-*); by default $WANDB_DIR, else the working folder."""
    model: str | None = None
    """Only the runs of this model (as the suite names it, its id or its runs' label); by default every run."""
