"""The demo's fine-grained tasks: zero-shot, few-shot and retrieval, per challenge group, for two models.

Why it exists: this is what the tool is for, shown on the sample suite. The tool's own rule is that challenge groups
are separate benchmarks (own label set, never pooled), so each task runs once per model grouped by
``challenge_group``; a pooled run of each task comes beside it as a summary, labelled ``pooled (summary)`` so it is
never read as the result. Two models are run on the same images, the demo model and an early checkpoint of its own
training, so the report's paired tests, Holm ties and rank charts have differences (and ties) to find; the summary
counts them for zero-shot species top-1 with the same paired bootstrap and Holm correction as ``compare``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from cladebench.demo.steps import DEMO_STEPS, NO_EMBEDDINGS, DemoContext, DemoModel

if TYPE_CHECKING:
    from cladebench.evaluate.record import RunRecord

POOLED = "pooled (summary)"
"""The label part of a pooled run: a summary over groups the tool otherwise never pools."""
N_RESAMPLES = 10_000
"""Paired bootstrap resamples per group in the summary's count (as ``compare`` and the report)."""


def _run(ctx: DemoContext, config_class: type, task: str, model: DemoModel, *, pooled: bool,
         **fields: object) -> tuple[RunRecord, Path]:
    from cladebench.evaluate.run import run_eval

    label = f"{model.label} · {POOLED}" if pooled else model.label
    folder = f"{task}-{'pooled-summary-' if pooled else ''}{model.slug}"
    # Tasks on stored vectors find the model's own column (emb_demo, emb_demo_early) by its metadata.
    return run_eval(config_class(run_name=label, dataset=str(ctx.dataset_path("fine-grained")), model=model.model,
                                 out=ctx.run_dir(folder), device="cpu", group_by="none" if pooled else "auto",
                                 **fields))


def _task_runs(ctx: DemoContext, config_class: type, task: str, headline: str, scale: float,
               **fields: object) -> dict[str, Any]:
    """Run ``task`` grouped and pooled for every model; the summary's lines name each model's headline metric, and
    the rows the grouped runs left out, by reason (genus-only rows, for one), as ``eval`` says them."""
    from cladebench.evaluate.run import rows_line

    runs: dict[str, dict[str, object]] = {}
    report: list[str] = []
    left_out: str | None = None
    for model in ctx.models:
        grouped, grouped_path = _run(ctx, config_class, task, model, pooled=False, **fields)
        pooled, pooled_path = _run(ctx, config_class, task, model, pooled=True, **fields)
        # A group the task left out (too few images for the shots) is in the record without a value: not counted.
        groups = [g for g in (grouped.provenance.get("groups") or {}).get("values") or []
                  if (grouped.metrics.get(f"{g}/{headline}") or {}).get("value") is not None]
        values = [grouped.metrics[f"{g}/{headline}"]["value"] for g in groups]
        by_group = {g: round(v, 4) for g, v in zip(groups, values, strict=True)}
        pooled_value = pooled.metrics[headline]["value"]
        runs[model.label] = {"grouped": str(grouped_path), "pooled": str(pooled_path), "headline": headline,
                             "by_group": by_group, "pooled_value": round(pooled_value, 4)}
        spread = (f"{scale * min(values):.1f}–{scale * max(values):.1f}" if values else "n/a")
        report.append(f"{model.label + ':':<14} {headline} {spread} across {len(groups)} challenge groups; "
                      f"{POOLED} {scale * pooled_value:.1f}")
        left_out = left_out or rows_line(grouped)  # the same rows for every model: said once
    if left_out:
        report.append(f"({left_out})")
    # Grouped runs first, side by side; the pooled summaries after them.
    return {"runs": runs, "run": [r[kind] for kind in ("grouped", "pooled") for r in runs.values()],
            "report": report}


def paired_by_group(first: str, second: str, metric: str) -> dict[str, str]:
    """Per challenge group, whether ``first`` and ``second`` (grouped runs on the same images) differ on ``metric``
    by the paired bootstrap with Holm's correction (``compare``'s test): ``better``, ``worse`` (first against
    second) or ``tied``; groups where the metric has no paired test are left out."""
    from cladebench.evaluate.compare import compare_runs

    comparison = compare_runs([Path(first), Path(second)], n_resamples=N_RESAMPLES, seed=0)
    out = {}
    for entry in comparison.metrics:
        group, _, base = entry.metric.rpartition("/")
        if base != metric or not group or not entry.differences:
            continue
        difference = entry.differences[0]  # second - first
        out[group] = ("tied" if not difference.holds
                      else "better" if difference.paired.difference < 0 else "worse")
    return out


@DEMO_STEPS.register("zeroshot")
def _zeroshot(ctx: DemoContext) -> dict[str, object]:
    """Zero-shot species classification of the fine-grained images per challenge group (each group's species are
    its label set), with a pooled summary, for both models; then the paired tests per group."""
    if not ctx.models:
        return dict(NO_EMBEDDINGS)
    from cladebench.evaluate.configs import ZeroShotEvalConfig

    result = _task_runs(ctx, ZeroShotEvalConfig, "zeroshot", "top1_species", 100.0)
    if len(ctx.models) == 2:
        first, second = (result["runs"][m.label]["grouped"] for m in ctx.models)
        verdicts = paired_by_group(first, second, "top1_species")
        result["paired"] = verdicts
        counts = {v: sum(1 for x in verdicts.values() if x == v) for v in ("better", "tied", "worse")}
        result["report"].append(
            f"paired per group (bootstrap, Holm, alpha 0.05): {ctx.models[0].label} better in {counts['better']}, "
            f"tied in {counts['tied']}, worse in {counts['worse']} of {len(verdicts)} groups")
    result["report"].append("(top-1 in %; each group's species are its label set; the report ranks every group)")
    return result


FEW_SHOT = {"shots": (1, 2), "repetitions": 5}
"""The demo's few-shot settings (its seed is the demo's)."""


@DEMO_STEPS.register("fewshot")
def _fewshot(ctx: DemoContext) -> dict[str, object]:
    """Few-shot species classification on the stored embeddings (no text): SimpleShot, linear probe, kNN, per
    challenge group with a pooled summary, for both models; a group too small for the shots is left out by the run
    itself, which says why (a smaller ``--images`` leaves more groups too small)."""
    if not ctx.models:
        return dict(NO_EMBEDDINGS)
    from threadpoolctl import threadpool_limits  # a dependency of scikit-learn, which few-shot needs

    from cladebench.errors import NotEvaluableError
    from cladebench.evaluate.configs import FewShotEvalConfig
    from cladebench.evaluate.record import RunRecord

    # The probes are small (tens of images of 64 numbers): BLAS threads only contend, and on a busy 2-core machine
    # the 16 grouped probes took minutes with them and seconds without.
    try:
        with threadpool_limits(limits=1, user_api="blas"):
            result = _task_runs(ctx, FewShotEvalConfig, "fewshot", "simpleshot_1shot", 100.0, **FEW_SHOT,
                                seed=ctx.config.seed)
    except NotEvaluableError as error:
        return {"skipped": f"{error} (--images {ctx.config.images} is too few for few-shot)"}
    grouped = RunRecord.read(Path(next(iter(result["runs"].values()))["grouped"]))
    left_out = (grouped.provenance.get("groups") or {}).get("left_out") or {}
    result["left_out_groups"] = list(left_out)
    result["report"].append("(accuracy in %, mean of 5 seeded splits, on the species with enough images"
                            + (f"; {len(left_out)} groups too small left out" if left_out else "") + ")")
    return result


@DEMO_STEPS.register("retrieval")
def _retrieval(ctx: DemoContext) -> dict[str, object]:
    """Image-to-image retrieval (an image of the same species is relevant) per challenge group with a pooled
    summary, for both models."""
    if not ctx.models:
        return dict(NO_EMBEDDINGS)
    from cladebench.evaluate.configs import RetrievalEvalConfig

    result = _task_runs(ctx, RetrievalEvalConfig, "retrieval", "map_species", 100.0)
    result["report"].append("(mAP in %, full ranking; each query's gallery is the other images of its group)")
    return result
