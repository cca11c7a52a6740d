"""`cladebench results` says why a number has no value: a group the task left out, or a value the task could not
define (top-5 over five labels), each in its own words."""

from __future__ import annotations

import pyarrow as pa

from cladebench.evaluate.suite.results import SCHEMA, format_results


def _row(metric: str, reason: str | None) -> dict[str, object]:
    return {"benchmark": "b", "task": "zeroshot", "protocol": "zeroshot", "settings": "{}", "model": "m",
            "model_id": "m", "revision": None, "metric": metric, "value": None, "low": None, "high": None, "n": 4,
            "label": "m", "run": "r/run.json", "key": "k", "status": "finished", "reason": reason,
            "recorded_at": "2026-01-01"}


def test_undefined_and_left_out_values_say_why() -> None:
    undefined = "undefined: top-5 over 3 labels holds every label, so it is 100% by construction"
    table = pa.Table.from_pylist([_row("zebras/top5_species", undefined), _row("mice/top1_species", "2 images")],
                                 schema=SCHEMA)
    text = format_results(table, "markdown")
    assert f"| n/a | {undefined} |" in text
    assert "| n/a | left out: 2 images |" in text
    assert "left out: undefined" not in text
