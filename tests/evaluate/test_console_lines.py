"""What eval prints beside the numbers: an undefined metric as n/a with its reason (never a bare 'undefined'),
and label sets a reader could confuse (look-alike characters, one text for several taxa)."""

from __future__ import annotations

from cladebench.evaluate.record import RunRecord
from cladebench.evaluate.run import format_metrics, label_notes


def test_an_undefined_metric_prints_its_reason_and_confusable_labels_are_said() -> None:
    record = RunRecord(task="zeroshot", config={}, metrics={
        "top1_species": {"value": 0.5, "low": 0.3, "high": 0.7, "n": 10},
        "top5_species": {"value": None, "low": None, "high": None, "n": 10,
                         "reason": "top-5 of 3 labels is 100% by construction"}},
        provenance={"label_set": {"lookalikes": [["Felis catus", "Felis c\u0430tus"]], "shared_texts": ["mouse"]}})
    lines = format_metrics(record).splitlines()
    assert lines[1].split() == ["top5_species", "n/a", "top-5", "of", "3", "labels", "is", "100%", "by",
                                "construction"]
    assert label_notes(record) == [
        "labels differ only by look-alike characters: Felis catus / Felis c\u0430tus",
        "one label text stands for several taxa: 'mouse' (scored by taxon, not by text)"]


def test_an_undefined_value_is_shown_without_an_interval() -> None:
    """Over no example Wilson's interval is [0, 100]: beside 'undefined' it would read as a measurement."""
    record = RunRecord(task="zeroshot", config={}, metrics={
        "top1_species": {"value": None, "low": 0.0, "high": 1.0, "n": 0}}, provenance={})
    assert format_metrics(record).split() == ["top1_species", "undefined", "n=0"]
