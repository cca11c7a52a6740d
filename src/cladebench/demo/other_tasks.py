"""The demo's other tasks, each on its own kind of data: rerank, geo, lineage, and building Co-Observed from an export.

Why it exists: these show the tasks beyond fine-grained classification with the demo model alone (one run each);
the fine-grained tasks, where two models are ranked, are :mod:`cladebench.demo.finegrained`.
"""

from __future__ import annotations

import pyarrow as pa

from cladebench import store
from cladebench.demo.steps import DEMO_STEPS, NO_EMBEDDINGS, DemoContext

RERANK_QUERIES = 8
RERANK_CANDIDATES = 16


def _rerank_table(source: pa.Table, seed: int) -> pa.Table:
    """INQUIRE-shaped pairs: each query is a species' common name; its candidates are that species' images and,
    as hard negatives, images of the nearest relatives available (same genus first, then family, order...)."""
    import numpy as np

    rows = source.to_pylist()
    by_species: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        by_species.setdefault(row["scientific_name"], []).append(i)
    eligible = sorted(name for name, members in by_species.items() if len(members) >= 2)
    rng = np.random.default_rng(seed)
    chosen = [eligible[i] for i in sorted(rng.choice(len(eligible), size=min(RERANK_QUERIES, len(eligible)),
                                                     replace=False))]
    ranks = ("genus", "family", "order", "class", "phylum", "kingdom")
    out: dict[str, list[object]] = {c: [] for c in (*source.column_names, "query_id", "query", "relevant")}
    for query_id, name in enumerate(chosen, start=1):
        members = by_species[name]
        anchor = rows[members[0]]
        others = [i for i in range(len(rows)) if rows[i]["scientific_name"] != name]
        closeness = [next((len(ranks) - d for d, r in enumerate(ranks) if rows[i][r] == anchor[r]), 0) for i in others]
        order = sorted(range(len(others)), key=lambda j: (-closeness[j], rng.random()))
        negatives = [others[j] for j in order[: RERANK_CANDIDATES - len(members)]]
        for i in [*members, *negatives]:
            for column in source.column_names:
                out[column].append(f"{query_id}-{rows[i]['uuid']}" if column == "uuid" else rows[i][column])
            out["query_id"].append(query_id)
            out["query"].append(anchor["common_name"] or name)
            out["relevant"].append(rows[i]["scientific_name"] == name)
    return pa.Table.from_pydict(out, schema=source.schema.append(pa.field("query_id", pa.int64()))
                                .append(pa.field("query", pa.string())).append(pa.field("relevant", pa.bool_())))


@DEMO_STEPS.register("rerank")
def _rerank(ctx: DemoContext) -> dict[str, object]:
    """A small INQUIRE-style rerank: species' common names as queries over their images and close relatives."""
    if not ctx.models:
        return dict(NO_EMBEDDINGS)
    demo = ctx.models[0]
    from cladebench.evaluate.configs import RerankEvalConfig
    from cladebench.evaluate.run import run_eval

    source = store.read(store.open_dataset(ctx.dataset_path("fine-grained")),
                        columns=["uuid", "image", "kingdom", "phylum", "class", "order", "family", "genus", "species",
                                 "scientific_name", "common_name", demo.column],
                        where="species IS NOT NULL")  # a genus-only row is no species' image, relevant or not
    path = ctx.dataset_path("rerank")
    store.write_dataset(_rerank_table(source, ctx.config.seed), path)
    record, run = run_eval(RerankEvalConfig(run_name=demo.label, dataset=str(path), model=demo.model,
                                            column=demo.column, out=ctx.run_dir("rerank"), device="cpu",
                                            group_by="none"))
    table = store.read(store.open_dataset(path), columns=["relevant"])
    positives = sum(table.column(0).to_pylist()) / table.num_rows
    metrics = {name: round(estimate["value"], 3) for name, estimate in record.metrics.items()}
    report = [f"AP@100 {metrics['ap@100']:.1f}  nDCG@100 {metrics['ndcg@100']:.1f}  MRR {metrics['mrr@100']:.3f}",
              f"({record.provenance['label_set']['size']} queries x {RERANK_CANDIDATES} candidates, "
              f"{100 * positives:.0f}% relevant: a random order scores AP about {100 * positives:.0f}; "
              f"run record {run})"]
    return {"run": str(run), "queries": record.provenance["label_set"]["size"], "positive_share": round(positives, 3),
            "metrics": metrics, "report": report}


@DEMO_STEPS.register("geo")
def _geo(ctx: DemoContext) -> dict[str, object]:
    """Zero-shot fused with a spatiotemporal prior fitted on other observations (the world's species have
    ranges and seasons): image-only against fused top-1 on the same test images, as a paired difference."""
    if not ctx.models:
        return dict(NO_EMBEDDINGS)
    demo = ctx.models[0]
    from cladebench.evaluate.configs import GeoEvalConfig
    from cladebench.evaluate.run import run_eval

    record, run = run_eval(GeoEvalConfig(run_name=demo.label, dataset=str(ctx.dataset_path("fine-grained")),
                                         model=demo.model, column=demo.column, out=ctx.run_dir("geo"), device="cpu",
                                         group_by="none", prior_seed=ctx.config.seed))
    image, fused = record.metrics["image_top1_species"], record.metrics["fused_top1_species"]
    gain = record.metrics["fused_minus_image_species"]
    report = [f"top-1 species: image alone {100 * image['value']:.1f}%, with the prior {100 * fused['value']:.1f}% "
              f"(paired gain {100 * gain['value']:+.1f} points, 95% CI [{100 * gain['low']:+.1f}, "
              f"{100 * gain['high']:+.1f}])",
              f"({image['n']} test images; prior fitted on other observations; image weight "
              f"{record.metrics['image_weight']['value']:.2f} chosen on validation; run record {run})"]
    return {"run": str(run), "image_top1": round(image["value"], 4), "fused_top1": round(fused["value"], 4),
            "gain": {k: round(gain[k], 4) for k in ("value", "low", "high")}, "report": report}


@DEMO_STEPS.register("coobserved-export")
def _coobserved_export(ctx: DemoContext) -> dict[str, object]:
    """Build iNat Co-Observed from a synthetic iNaturalist open-data export, as from the real one: the filters,
    the per-rank sampling and the card, out of core with DuckDB. (Its photos are URLs; the lineage step below
    runs on the rendered two-organism photos, which have pixels offline.)"""
    from cladebench.benchmarks.coobserved.builder.build import build_coobserved
    from cladebench.benchmarks.coobserved.builder.config import CoObservedBuildConfig
    from cladebench.synthetic.inat_export import ExportConfig, write_export

    export = write_export(ctx.out_dir / "inat-export", ExportConfig(n_photos=20_000, seed=ctx.config.seed))
    summary = build_coobserved(CoObservedBuildConfig(export_dir=export.export_dir, out=ctx.out_dir / "coobserved-build",
                                                     seed=ctx.config.seed, per_rank=50))
    report = [f"{summary.rows:,} photos kept of {summary.eligible:,} eligible from {summary.photo_ids:,} photo ids; "
              + ", ".join(f"{rank} {n}" for rank, n in summary.kept_per_rank.items()),
              f"(every photo left out is counted by reason in {summary.card_path})"]
    return {"export": str(export.export_dir), "photos": summary.rows, "eligible": summary.eligible,
            "kept_per_rank": summary.kept_per_rank, "card": str(summary.card_path), "report": report}


@DEMO_STEPS.register("lineage")
def _lineage(ctx: DemoContext) -> dict[str, object]:
    """Steered lineage completion on the two-organism photos: the hint (the lineage down to where the two
    organisms part) against no hint, so the value of the hint shows."""
    if not ctx.models:
        return dict(NO_EMBEDDINGS)
    demo = ctx.models[0]
    from cladebench.evaluate.configs import LineageEvalConfig
    from cladebench.evaluate.run import run_eval

    record, run = run_eval(LineageEvalConfig(run_name=demo.label, dataset=str(ctx.dataset_path("co-observed")),
                                             model=demo.model, column=demo.column, out=ctx.run_dir("lineage"),
                                             device="cpu", group_by="none"))
    keys = ("exact", "depth", "lca_distance", "named_other")
    metrics = {f"{c}_{k}": round(record.metrics[f"{c}_{k}"]["value"], 3) for c in ("hint", "nohint") for k in keys
               if f"{c}_{k}" in record.metrics}
    report = [f"{label} exact completion {100 * metrics[f'{c}_exact']:.1f}%, correct depth "
              f"{metrics[f'{c}_depth']:.2f} ranks, named the other organism {100 * metrics[f'{c}_named_other']:.1f}%"
              for c, label in (("hint", "with the hint:"), ("nohint", "without it:   "))]
    report.append(f"({record.metrics['hint_exact']['n']} targets; run record {run})")
    return {"run": str(run), "targets": record.metrics["hint_exact"]["n"], "metrics": metrics, "report": report}
