"""Real run records that make a report wide: zero-shot runs of two tiny models over many challenge groups with long
names (``Class|Order|Family``), a pooled zero-shot run beside them (grouped and pooled rows mixed in one task), a
run that lacks one group and has one undefined value, and a pooled few-shot run with six headline metrics (two shot
counts x three methods). The report tests load them at 1,400 px and check the layout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa

from cladebench import store

SHOTS = (1, 2)
"""Few-shot shot counts: with three methods, six headline metrics."""
METHODS = ("simpleshot", "linear", "knn")
"""Few-shot methods."""


def long_group_names(table: pa.Table) -> pa.Table:
    """The table with each row's challenge group named ``Class|Order|Family`` (one group per family)."""
    names = [f"{c}|{o}|{f}" for c, o, f in zip(table.column("class").to_pylist(), table.column("order").to_pylist(),
                                               table.column("family").to_pylist(), strict=True)]
    return table.set_column(table.column_names.index("challenge_group"), "challenge_group", pa.array(names))


def plant_undefined(run: Path, metric: str) -> None:
    """Write ``metric`` of the run record at ``run`` as undefined (value and interval null, as a record writes NaN)."""
    record = json.loads(run.read_text())
    record["metrics"][metric].update(value=None, low=None, high=None)
    run.write_text(json.dumps(record))


def build_wide_runs(root: Path) -> dict[str, Any]:
    """Write the dataset, embed it with two tiny models and run the evaluations; returns the run paths by name and
    what the tests need to know about them (the groups, the group left out, the metric made undefined)."""
    from cladebench.embed import EmbedConfig, embed_dataset
    from cladebench.evaluate.configs import eval_config
    from cladebench.evaluate.run import run_eval
    from cladebench.models.tiny import write_tiny_model
    from cladebench.synthetic import WorldConfig, make_world

    models = {name: "local-dir:" + str(write_tiny_model(root / name, seed=seed))
              for name, seed in (("tiny-a", 4), ("tiny-b", 5))}
    world = make_world(WorldConfig(seed=2, names="generated", branching=(1, 1, 3, 1, 2, 2, 2)))
    table = long_group_names(world.to_table(96, seed=7, image_format="jpeg"))
    # Some photos carry no license or attribution: the gallery says so once.
    blank = [None if i % 3 == 0 else value for i, value in enumerate(table.column("attribution").to_pylist())]
    table = table.set_column(table.column_names.index("attribution"), "attribution", pa.array(blank, pa.string()))
    dataset = root / "wide.lance"
    store.write_dataset(table, dataset)
    for name, model in models.items():
        embed_dataset(EmbedConfig(dataset=str(dataset), model=model, column=f"emb_{name[-1]}", workers=0,
                                  device="cpu", progress=False))
    groups = sorted(set(table.column("challenge_group").to_pylist()))
    left_out = groups[-1]

    def run(name: str, model: str, **options: Any) -> Path:
        return run_eval(eval_config(dataset=str(dataset), model=models[model], out=root / name, device="cpu",
                                    **options))[1]

    runs = {
        "grouped-a": run("grouped-a", "tiny-a"),
        "grouped-b": run("grouped-b", "tiny-b"),
        "pooled-a": run("pooled-a", "tiny-a", group_by="none"),
        "partial-b": run("partial-b", "tiny-b", where=f"challenge_group != '{left_out}'"),
        "fewshot": run("fewshot", "tiny-a", task="fewshot", group_by="none", shots=SHOTS, methods=METHODS,
                       repetitions=2),
    }
    undefined = f"{groups[0]}/top1_species"
    plant_undefined(runs["partial-b"], undefined)
    return {"runs": runs, "groups": groups, "left_out": left_out, "undefined": undefined}
