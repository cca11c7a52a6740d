"""Zero-shot runs of a tiny CLIP kept in a deep checkpoint folder (``deep/checkpoints/tiny-clip``): what the tests of
run labels need, since a run is named by its model's last folder while the whole path stays in its provenance."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path


def deep_checkpoint_runs(root: Path, runs: Mapping[str, Sequence[str]]) -> tuple[Path, str]:
    """A small world with photos (``root/world.lance``, 24 rows of generated names) embedded as ``emb_tiny`` by the
    tiny CLIP (seed 1) at ``root/deep/checkpoints/tiny-clip``, then one ``eval zeroshot`` (no groups) per entry of
    ``runs`` (its folder under ``root`` -> extra options); returns the dataset and the ``local-dir:`` model name."""
    from cladebench.cli import main
    from cladebench.models.tiny import write_tiny_model
    from cladebench.synthetic import WorldConfig, make_world
    from helpers.embedded import write_embedded

    model = "local-dir:" + str(write_tiny_model(root / "deep" / "checkpoints" / "tiny-clip", seed=1))
    world = make_world(WorldConfig(seed=2, names="generated", branching=(1, 1, 2, 1, 2, 2, 2)))
    dataset = root / "world.lance"
    write_embedded(world.to_table(24, seed=3, image_format="jpeg"), dataset, model)
    for name, extra in runs.items():
        code = main(["eval", "zeroshot", str(dataset), "--model", model, "--out", str(root / name), "--device", "cpu",
                     "--group-by", "none", *extra])
        assert code == 0, f"eval zeroshot ({name}) exited {code}"
    return dataset, model
