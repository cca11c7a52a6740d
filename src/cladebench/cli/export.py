"""The verbs ``export model-card``, ``export mlflow`` and ``export wandb``: checked results written where
researchers keep them (:mod:`cladebench.export`). Each member's config lives in :mod:`cladebench.export.configs`,
so ``export --help`` imports none of the libraries a format needs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cladebench.cli.verbs import FAMILIES, Family, Verb

if TYPE_CHECKING:
    from cladebench.export.configs import MlflowConfig, ModelCardConfig, WandbConfig


def _said(left_out: list[str]) -> None:
    from cladebench.evaluate.labels import one_line

    for line in left_out:  # one line each, whatever the names in it hold
        print(f"  left out: {one_line(line)}")


def _model_card(config: ModelCardConfig) -> int:
    from cladebench.export.model_card import run_model_card

    written = run_model_card(config)
    print(f"{written.path}: {written.written} results of {written.runs} run{'s' * (written.runs != 1)} in its "
          "model-index"
          + (f", {written.kept} kept from before" if written.kept else "")
          + "; nothing uploaded (push it with `huggingface-cli upload REPO README.md`)")
    _said(written.left_out)
    return 0


def _mlflow(config: MlflowConfig) -> int:
    from cladebench.export.mlflow_runs import export_to_mlflow

    done = export_to_mlflow(config.runs, tracking_uri=config.tracking_uri, experiment=config.experiment,
                            model=config.model)
    print(f"mlflow: {len(done.logged)} run{'s' * (len(done.logged) != 1)} logged, {len(done.already)} there "
          "already (same record SHA-256), "
          f"experiment {done.experiment!r} at {done.tracking_uri}")
    _said(done.left_out)
    return 0


def _wandb(config: WandbConfig) -> int:
    from cladebench.export.wandb_runs import export_to_wandb

    done = export_to_wandb(config.runs, project=config.project, entity=config.entity, folder=config.dir,
                           model=config.model)
    print(f"wandb ({done.mode}): {len(done.logged)} run{'s' * (len(done.logged) != 1)} logged, {len(done.already)} "
          f"there already, project {config.project!r}"
          + (f"; upload them with `wandb sync {done.folder / 'wandb'}/offline-run-*`" if done.logged
             and done.mode != "online" else ""))
    _said(done.left_out)
    return 0


def _members() -> dict[str, Verb]:
    return {"model-card": Verb(name="model-card", config="cladebench.export.configs:ModelCardConfig",
                               help="a model's checked results as a Hugging Face model card's model-index (README.md "
                                    "metadata, written or updated; nothing uploaded)", run=_model_card),
            "mlflow": Verb(name="mlflow", config="cladebench.export.configs:MlflowConfig",
                           help="each checked run as one MLflow run: params, metrics with intervals, tags, run.json "
                                "and its report; a run logged before is not logged again", run=_mlflow),
            "wandb": Verb(name="wandb", config="cladebench.export.configs:WandbConfig",
                          help="each checked run as one Weights & Biases run, offline unless $WANDB_MODE says "
                               "otherwise (wandb sync uploads later); a run logged before is not logged again",
                          run=_wandb)}


FAMILIES.add("export", Family(help="checked results of a suite or of runs where researchers keep them: a Hugging Face "
                                   "model card, MLflow or W&B runs", metavar="FORMAT", members=_members))
