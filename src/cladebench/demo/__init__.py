"""The offline demo: build a sample suite from the synthetic world and run every registered step on it.

The demo is what a new user runs first, with no network and no model weights. It is built from the
same public functions a researcher calls (synthetic world -> canonical tables -> Lance datasets ->
indices, tags, subsets), so when it runs, the flow works end to end. Later steps (embedding, tasks,
reports) register themselves in :data:`DEMO_STEPS` and run in registration order.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from cladebench import __version__, store
from cladebench.registry import Registry
from cladebench.store.sql import sql_literal

if TYPE_CHECKING:
    from cladebench.demo.config import DemoConfig
    from cladebench.synthetic import World


@dataclass
class DemoContext:
    """What the steps share: the config, the world, the output directory and the summary being built."""

    config: DemoConfig
    world: World
    out_dir: Path
    summary: dict[str, Any] = field(default_factory=dict)

    def dataset_path(self, name: str) -> Path:
        return self.out_dir / f"{name}.lance"


DemoStep = Callable[[DemoContext], dict[str, Any]]
DEMO_STEPS: Registry[DemoStep] = Registry("demo step")
"""Demo steps by name, run in registration order (``@DEMO_STEPS.register(name)``); each returns a JSON-ready
summary of what it did."""


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _in_batches(make: Callable[[int, int], pa.Table], total: int, batch: int, label: str) -> Iterator[pa.Table]:
    """Render and yield a table in batches, so memory stays flat and the progress bar moves."""
    from tqdm import tqdm

    with tqdm(total=total, desc=label, unit="img", file=sys.stderr, leave=False) as bar:
        for start in range(0, total, batch):
            table = make(start, min(batch, total - start))
            bar.update(table.num_rows)
            yield table


def _dataset_summary(path: Path) -> dict[str, Any]:
    ds = store.open_dataset(path)
    return {"path": str(path), "rows": ds.count_rows(), "version": ds.version, "fingerprint": store.fingerprint(ds)}


@DEMO_STEPS.register("fine-grained")
def _fine_grained(ctx: DemoContext) -> dict[str, Any]:
    """Single-organism WebP images with a challenge group, as the Fine-Grained Challenges table has."""
    path = ctx.dataset_path("fine-grained")
    seed = ctx.config.seed
    tables = _in_batches(
        lambda start, n: ctx.world.to_table(n, seed=seed, image_format="webp", start=start),
        ctx.config.images, 64, "fine-grained images",
    )
    ds = store.write_dataset(tables, path)
    store.create_scalar_index(ds, "uuid", "BTREE")
    store.create_scalar_index(ds, "challenge_group", "BITMAP")
    ds = store.open_dataset(path)
    store.tag(ds, "demo")
    return _dataset_summary(path)


@DEMO_STEPS.register("co-observed")
def _co_observed(ctx: DemoContext) -> dict[str, Any]:
    """Photos showing two organisms of different species, as iNat Co-Observed has."""
    path = ctx.dataset_path("co-observed")
    seed = ctx.config.seed
    tables = _in_batches(
        lambda start, n: ctx.world.pair_table(n, seed=seed, image_format="jpeg", start=start),
        ctx.config.pairs, 32, "co-observed images",
    )
    store.write_dataset(tables, path)
    return _dataset_summary(path)


@DEMO_STEPS.register("subset")
def _subset(ctx: DemoContext) -> dict[str, Any]:
    """One challenge group materialised with filter and projection pushed down, as the cards show."""
    source = store.open_dataset(ctx.dataset_path("fine-grained"))
    groups = store.read(source, columns=["challenge_group"]).column(0).to_pylist()
    group = max(sorted(set(groups)), key=groups.count)
    path = ctx.dataset_path("fine-grained-subset")
    where = f"challenge_group = {sql_literal(group)}"
    store.subset(ctx.dataset_path("fine-grained"), path, where=where,
                 columns=["image", "kingdom", "phylum", "class", "order", "family", "genus", "species",
                          "scientific_name", "challenge_group"])
    return {**_dataset_summary(path), "where": where}


DEMO_MODEL_NOTICE = (
    "the demo model is a tiny CLIP trained on this synthetic world (cached after its first training): "
    "its accuracies show the pipeline carries real signal, and say nothing about real organisms"
)


@DEMO_STEPS.register("embed")
def _embed(ctx: DemoContext) -> dict[str, Any]:
    """Encode every demo image once with the demo model into ``emb_demo``."""
    try:
        import open_clip  # noqa: F401
        import torch  # noqa: F401
    except ImportError:
        return {"skipped": "torch and open_clip are not installed: pip install 'cladebench[clip]'"}
    from cladebench.demo.model import DemoModelConfig, demo_model_id
    from cladebench.embed import EmbedConfig, embed_dataset
    from cladebench.models import load_encoder

    _say(f"[demo] note: {DEMO_MODEL_NOTICE}")
    model = demo_model_id(config=DemoModelConfig(world_seed=ctx.config.seed))
    encoder = load_encoder(model, device="cpu")
    columns = {}
    for name in ("fine-grained", "co-observed"):
        summary = embed_dataset(
            EmbedConfig(dataset=str(ctx.dataset_path(name)), model=model, column="emb_demo", device="cpu"),
            encoder=encoder,
        )
        columns[name] = {"valid": summary.valid, "failed": summary.failed, "rows_per_second": summary.rows_per_second}
    return {"model": model, "weights": "trained on the synthetic world", "notice": DEMO_MODEL_NOTICE,
            "column": "emb_demo", "datasets": columns}


@DEMO_STEPS.register("zeroshot")
def _zeroshot(ctx: DemoContext) -> dict[str, Any]:
    """Zero-shot species classification of the fine-grained images, with a run record."""
    embed = ctx.summary["steps"].get("embed", {})
    if "model" not in embed:
        return {"skipped": "no embeddings (the embed step was skipped)"}
    from cladebench.evaluate.run import ZeroShotEvalConfig, run_eval

    record, path = run_eval(ZeroShotEvalConfig(dataset=str(ctx.dataset_path("fine-grained")), model=embed["model"],
                                       out=ctx.out_dir / "runs" / "zeroshot-fine-grained", device="cpu",
                                               group_by="none"))
    label_set = record.provenance["label_set"]
    chance = 1.0 / label_set["size"]
    metrics = {name: round(estimate["value"], 4) for name, estimate in record.metrics.items()}
    ranks = ", ".join(f"{k.removeprefix('top1_')} {100 * v:.1f}%" for k, v in metrics.items() if k.startswith("top1_"))
    report = [f"top-1 {ranks}",
              f"(species chance {100 * chance:.1f}%, model {embed.get('weights', 'trained')}; run record {path})"]
    return {"run": str(path), "labels": label_set["size"], "chance_top1": round(chance, 4), "metrics": metrics,
            "weights": embed.get("weights", "trained"), "report": report}


@DEMO_STEPS.register("fewshot")
def _fewshot(ctx: DemoContext) -> dict[str, Any]:
    """Few-shot species classification on the stored embeddings (no text): SimpleShot, linear probe, kNN."""
    embed = ctx.summary["steps"].get("embed", {})
    if "model" not in embed:
        return {"skipped": "no embeddings (the embed step was skipped)"}
    from cladebench.evaluate.run import FewShotEvalConfig, run_eval

    record, path = run_eval(FewShotEvalConfig(
        dataset=str(ctx.dataset_path("fine-grained")), model=embed["model"], column="emb_demo",
        out=ctx.out_dir / "runs" / "fewshot-fine-grained", device="cpu", group_by="none", shots=(1, 2),
        repetitions=5, seed=ctx.config.seed))
    classes = record.provenance["split"]["classes"]
    chance = 1.0 / classes if classes else float("nan")
    metrics = {name: round(estimate["value"], 4) for name, estimate in record.metrics.items()
               if not name.endswith("_balanced")}
    report = ["  ".join(f"{name} {100 * value:.1f}%" for name, value in metrics.items()),
              f"({classes} species with enough images, chance {100 * chance:.1f}%, 5 seeded splits; run record {path})"]
    return {"run": str(path), "classes": classes, "chance": round(chance, 4), "metrics": metrics, "report": report}


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
    out: dict[str, list[Any]] = {c: [] for c in (*source.column_names, "query_id", "query", "relevant")}
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
def _rerank(ctx: DemoContext) -> dict[str, Any]:
    """A small INQUIRE-style rerank: species' common names as queries over their images and close relatives."""
    embed = ctx.summary["steps"].get("embed", {})
    if "model" not in embed:
        return {"skipped": "no embeddings (the embed step was skipped)"}
    from cladebench.evaluate.run import eval_config, run_eval

    source = store.read(store.open_dataset(ctx.dataset_path("fine-grained")),
                        columns=["uuid", "image", "kingdom", "phylum", "class", "order", "family", "genus", "species",
                                 "scientific_name", "common_name", "emb_demo"])
    path = ctx.dataset_path("rerank")
    store.write_dataset(_rerank_table(source, ctx.config.seed), path)
    record, run = run_eval(eval_config(dataset=str(path), model=embed["model"], task="rerank", column="emb_demo",
                                       out=ctx.out_dir / "runs" / "rerank", device="cpu", group_by="none"))
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
def _geo(ctx: DemoContext) -> dict[str, Any]:
    """Zero-shot fused with a spatiotemporal prior fitted on other observations (the world's species have
    ranges and seasons): image-only against fused top-1 on the same test images, as a paired difference."""
    embed = ctx.summary["steps"].get("embed", {})
    if "model" not in embed:
        return {"skipped": "no embeddings (the embed step was skipped)"}
    from cladebench.evaluate.run import eval_config, run_eval

    record, run = run_eval(eval_config(dataset=str(ctx.dataset_path("fine-grained")), model=embed["model"],
                                       task="geo", column="emb_demo", out=ctx.out_dir / "runs" / "geo", device="cpu",
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
def _coobserved_export(ctx: DemoContext) -> dict[str, Any]:
    """Build iNat Co-Observed from a synthetic iNaturalist open-data export, as from the real one: the filters,
    the per-rank sampling and the card, out of core with DuckDB. (Its photos are URLs; the lineage step below
    runs on the rendered two-organism photos, which have pixels offline.)"""
    from cladebench.curate.builders.coobserved.build import build_coobserved
    from cladebench.curate.builders.coobserved.config import CoObservedBuildConfig
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
def _lineage(ctx: DemoContext) -> dict[str, Any]:
    """Steered lineage completion on the two-organism photos: the hint (the lineage down to where the two
    organisms part) against no hint, so the value of the hint shows."""
    embed = ctx.summary["steps"].get("embed", {})
    if "model" not in embed:
        return {"skipped": "no embeddings (the embed step was skipped)"}
    from cladebench.evaluate.run import eval_config, run_eval

    record, run = run_eval(eval_config(dataset=str(ctx.dataset_path("co-observed")), model=embed["model"],
                                       task="lineage", column="emb_demo", out=ctx.out_dir / "runs" / "lineage",
                                       device="cpu", group_by="none"))
    keys = ("exact", "depth", "lca_distance", "named_other")
    metrics = {f"{c}_{k}": round(record.metrics[f"{c}_{k}"]["value"], 3) for c in ("hint", "nohint") for k in keys
               if f"{c}_{k}" in record.metrics}
    report = [f"{label} exact completion {100 * metrics[f'{c}_exact']:.1f}%, correct depth "
              f"{metrics[f'{c}_depth']:.2f} ranks, named the other organism {100 * metrics[f'{c}_named_other']:.1f}%"
              for c, label in (("hint", "with the hint:"), ("nohint", "without it:   "))]
    report.append(f"({record.metrics['hint_exact']['n']} targets; run record {run})")
    return {"run": str(run), "targets": record.metrics["hint_exact"]["n"], "metrics": metrics, "report": report}


@DEMO_STEPS.register("report")
def _report(ctx: DemoContext) -> dict[str, Any]:
    """One HTML page of every run above: leaderboard, charts, calibration, galleries, provenance."""
    runs = [Path(r["run"]) for r in ctx.summary["steps"].values() if isinstance(r, dict) and "run" in r]
    if not runs:
        return {"skipped": "no run records (the tasks were skipped)"}
    try:
        import jinja2  # noqa: F401
        import matplotlib  # noqa: F401
    except ImportError:
        return {"skipped": "jinja2 and matplotlib are not installed: pip install 'cladebench[report]'"}
    from cladebench.report import write_report

    html = write_report(runs, ctx.out_dir / "report.html", title="cladebench demo (synthetic world)")
    markdown = write_report(runs, ctx.out_dir / "report.md", format="md", title="cladebench demo (synthetic world)")
    return {"html": str(html), "markdown": str(markdown), "runs": len(runs),
            "report": [f"{html}  (open it in a browser; Markdown tables in {markdown.name})"]}


WRITER = "demo"
"""The demo folder's marker names this writer (:mod:`cladebench.curate.staging`)."""


def _is_unmarked_demo(folder: Path) -> bool:
    """A demo folder written before output markers: its summary.json is a demo's."""
    try:
        summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(summary, dict) and "cladebench_version" in summary and "steps" in summary


def run_demo(config: DemoConfig) -> dict[str, Any]:
    """Build the sample suite under ``config.out``, run every step, write ``summary.json``, print a summary."""
    from cladebench.config import at_least
    from cladebench.curate.staging import OutputTarget, prepare_in_place
    from cladebench.synthetic import WorldConfig, make_world

    # Both suites need rows (an empty one fails at its first write): refused before the folder is made.
    at_least("--images", config.images, 1)
    at_least("--pairs", config.pairs, 1)

    # Written in place (its run records name its datasets by path), marked first. A previous demo, finished or
    # killed midway, is replaced without being asked (the README's command must work when run again); a folder
    # that is not a demo's is never touched, whatever --overwrite says.
    out_dir = prepare_in_place(OutputTarget(Path(config.out), writer=WRITER, overwrite=True,
                                            legacy=_is_unmarked_demo))
    started = time.perf_counter()
    world = make_world(WorldConfig(seed=config.seed))
    ctx = DemoContext(config=config, world=world, out_dir=out_dir)
    ctx.summary = {
        "cladebench_version": __version__,
        "command": " ".join(["cladebench", *sys.argv[1:]]) if sys.argv else "cladebench demo",
        "seed": config.seed,
        "world": world.provenance(),
        "steps": {},
    }
    for name, step in DEMO_STEPS.items():
        _say(f"[demo] {name} ...")
        step_started = time.perf_counter()
        result = step(ctx)
        result["seconds"] = round(time.perf_counter() - step_started, 2)
        ctx.summary["steps"][name] = result
    ctx.summary["seconds"] = round(time.perf_counter() - started, 2)
    (out_dir / "summary.json").write_text(json.dumps(ctx.summary, indent=2, default=str) + "\n")
    _print_summary(ctx)
    return ctx.summary


def _print_summary(ctx: DemoContext) -> None:
    world = ctx.summary["world"]
    lines = [
        f"cladebench demo: synthetic world seed {ctx.config.seed}, {world.get('species')} species "
        f"({world.get('names')} names)",
    ]
    for name, result in ctx.summary["steps"].items():
        if "rows" in result:
            lines.append(f"  {name:<22} {result['rows']:>6,} rows  {result['path']}  "
                         f"fingerprint {result['fingerprint'][:16]}…")
        elif "report" in result:
            lines.extend(f"  {name if i == 0 else '':<22} {line}" for i, line in enumerate(result["report"]))
        elif "datasets" in result:
            for dataset, counts in result["datasets"].items():
                lines.append(f"  {name + ' ' + dataset:<22} {counts['valid']:>6,} rows  {result['column']} "
                             f"({counts['failed']} failed) with {result['model']}")
        else:
            lines.append(f"  {name:<22} " + ", ".join(f"{k}={v}" for k, v in result.items() if k != "seconds"))
    if "notice" in ctx.summary["steps"].get("embed", {}):
        lines.append(f"note: {DEMO_MODEL_NOTICE}")
    lines.append(f"summary: {ctx.out_dir / 'summary.json'}  ({ctx.summary['seconds']} s)")
    lines.append(f"inspect: cladebench info {ctx.dataset_path('fine-grained')}")
    print("\n".join(lines))
