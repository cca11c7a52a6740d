"""The demo verbs: ``demo-model`` (train the tiny CLIP of the synthetic world) and ``demo`` (the offline suite)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from cladebench.cli.verbs import verb

if TYPE_CHECKING:
    from cladebench.demo.config import DemoConfig

# --- demo-model --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DemoModelCommand:
    """Train the tiny CLIP of the synthetic world (for demos and tests only) and save it as local-dir:."""

    action: Literal["train"]
    """What to do: train."""
    out: Path | None = None
    """Folder for the checkpoint; by default the cache folder that `cladebench demo` and the tests reuse, where the
    early checkpoint the demo ranks against it (the same training stopped early) is cached too."""
    seed: int = 0
    """Seed of the weights, the training draw, the batch order and the captions."""
    world_seed: int = 0
    """Seed of the synthetic world (the demo's world is seed 0)."""
    steps: int | None = None
    """Optimizer steps (default: the full recipe)."""
    overwrite: bool = False
    """Replace an existing checkpoint in --out."""


@verb("demo-model", DemoModelCommand, "train the demo model: a tiny CLIP of the synthetic world")
def _demo_model(command: DemoModelCommand) -> int:
    import dataclasses as dc

    from cladebench.demo.model import DemoModelConfig, demo_model_id, early_config, train_demo_model

    config = DemoModelConfig(seed=command.seed, world_seed=command.world_seed)
    if command.steps is not None:
        config = dc.replace(config, steps=command.steps)
    if command.out is None:
        from cladebench.cache import record_demo_model

        model_id = demo_model_id(config=config)
        path = Path(model_id.removeprefix("local-dir:"))
        record_demo_model(path)  # `--model demo` is now this checkpoint
        early = early_config(config)
        print(f"early checkpoint (step {early.stop_after} of {early.steps}, which the demo ranks against it): "
              f"{demo_model_id(config=early)}")
    else:
        path = train_demo_model(config, command.out, overwrite=command.overwrite)
    record = json.loads((path / "training.json").read_text())
    evaluation = record.get("evaluation") or {}
    print(f"demo model: local-dir:{path}" + (" (--model demo)" if command.out is None else ""))
    if evaluation:
        print("held-out zero-shot top-1: " + ", ".join(
            f"{rank} {100 * value:.1f}%" for rank, value in evaluation.get("top1", evaluation).items()
            if isinstance(value, (int, float))))
    print("a model of a synthetic world: useful for demos and tests only")
    return 0


# --- demo ----------------------------------------------------------------------------------------


@verb("demo", "cladebench.demo.config:DemoConfig", "build the offline sample suite and run every task on it")
def _demo(config: DemoConfig) -> int:
    from cladebench import demo

    demo.run_demo(config)
    return 0
