"""Real run records that make a report wide: zero-shot runs of two tiny models over many challenge groups with long
names (``Class|Order|Family``), a pooled zero-shot run beside them (grouped and pooled rows mixed in one task), a
run that lacks one group and has one undefined value, and a pooled few-shot run with six headline metrics (two shot
counts x three methods). The report tests load them at 1,400 px and check the layout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

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


def plant_undefined(run: Path, group: str) -> None:
    """Make ``group`` of the run record at ``run`` one whose rows are predicted but none scored at the label rank
    (as when every photo of it is labelled only to genus): its predictions say so, and the record is written again
    with every metric recomputed from them, so its species metrics are undefined (null) as such a run records them
    and the record still agrees with its predictions."""
    from cladebench.evaluate.record import RunRecord
    from cladebench.evaluate.selection import LEFT_OUT
    from cladebench.evaluate.verify import recompute_metrics

    record = RunRecord.read(run)
    table = record.predictions(run)
    rank = record.provenance["task"]["rank"]
    in_group = pc.equal(table.column("group"), group).fill_null(False)
    for column in ("scored", "correct_top1", "correct_top5"):
        table = table.set_column(table.column_names.index(column), column,
                                 pc.if_else(in_group, False, table.column(column)))
    table = table.set_column(table.column_names.index("true_index"), "true_index",
                             pc.if_else(in_group, pa.scalar(None, pa.int64()), table.column("true_index")))
    left_out = {name: estimate for name, estimate in record.metrics.items() if estimate.get(LEFT_OUT)}
    record.metrics = {**recompute_metrics(record, table), **left_out}
    assert record.metrics[f"{group}/top1_{rank}"]["value"] != record.metrics[f"{group}/top1_{rank}"]["value"]
    record.write(run.parent, table)


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
    plant_undefined(runs["partial-b"], groups[0])
    return {"runs": runs, "groups": groups, "left_out": left_out, "undefined": undefined}
