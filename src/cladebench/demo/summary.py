"""The demo's last step and its summary: one report of every run, and what the terminal shows at the end.

Why it exists: the report is built from the run records every task step left, and the printed summary reads
every step's result; both come after all the steps and belong to none of them.
"""

from __future__ import annotations

from pathlib import Path

from cladebench.demo.steps import DEMO_STEPS, DemoContext
from cladebench.demo.suite import DEMO_LABEL, DEMO_MODEL_NOTICE


def run_records(ctx: DemoContext) -> list[Path]:
    """Every run record the steps wrote, in step order (a step's ``run`` is one path or a list of them)."""
    out: list[Path] = []
    for result in ctx.summary["steps"].values():
        run = result.get("run") if isinstance(result, dict) else None
        out.extend(Path(r) for r in ([run] if isinstance(run, str) else run or []))
    return out


@DEMO_STEPS.register("report")
def _report(ctx: DemoContext) -> dict[str, object]:
    """One HTML page of every run above: leaderboard, charts, calibration, galleries, provenance."""
    runs = run_records(ctx)
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


def summary_lines(ctx: DemoContext) -> list[str]:
    """What the demo prints at the end: each step's result, where things are, and a next command to try."""
    world = ctx.summary["world"]
    lines = [
        f"cladebench demo: synthetic world seed {ctx.config.seed}, {world.get('species')} species "
        f"({world.get('names')} names)",
    ]
    for name, result in ctx.summary["steps"].items():
        if "rows" in result:
            lines.append(f"  {name:<22} {result['rows']:>6,} rows  {result['path']}  "
                         f"fingerprint {result['fingerprint'][:16]}…")
            if result.get("genus_only"):
                lines.append(f"  {'':<22} {result['genus_only']['rows']:>6,} of them labelled to genus only "
                             f"({result['genus_only']['genus']}): not scored at species, first in the review queue")
        elif "report" in result:
            lines.extend(f"  {name if i == 0 else '':<22} {line}" for i, line in enumerate(result["report"]))
        elif "datasets" in result:
            for dataset, counts in result["datasets"].items():
                lines.append(f"  {name + ' ' + dataset.split()[0]:<22} {counts['valid']:>6,} rows  "
                             f"{counts['column']} ({counts['failed']} failed) with {counts['model']}")
        else:
            lines.append(f"  {name:<22} " + ", ".join(f"{k}={v}" for k, v in result.items() if k != "seconds"))
    if ctx.models:
        embed = ctx.summary["steps"]["embed"]
        lines.append(f"models: {ctx.models[0].label} (the demo model, --model {DEMO_LABEL}) and {ctx.models[1].label} "
                     f"(its own training stopped early: {embed['early_step']})")
        lines.append(f"note: {DEMO_MODEL_NOTICE}")
    lines.append(f"summary: {ctx.out_dir / 'summary.json'}  ({ctx.summary['seconds']} s)")
    lines.append(f"inspect: cladebench info {ctx.dataset_path('fine-grained')}")
    zeroshot = (ctx.summary["steps"].get("zeroshot") or {}).get("runs") or {}  # the runs on that dataset
    shown = "".join(f" {r['grouped']}" for r in zeroshot.values() if isinstance(r, dict) and r.get("grouped"))
    lines.append(f"browse:  cladebench serve {ctx.dataset_path('fine-grained')}{shown}")
    if ctx.models:
        # The same model with another name style, then compared with the demo's own run on the same images.
        grouped = ctx.summary["steps"]["zeroshot"]["runs"][ctx.models[0].label]["grouped"]
        lines.append(f"next:    cladebench eval zeroshot {ctx.dataset_path('fine-grained')} "
                     f"--model {DEMO_LABEL} --name-style sci --out runs/zeroshot-sci")
        lines.append(f"then:    cladebench compare {grouped} runs/zeroshot-sci/run.json")
    return lines
