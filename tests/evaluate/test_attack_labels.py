"""Run labels read well where runs share one: no ``None`` values, no task default named, runs of other tasks
not told apart by each other's settings; hostile labels stay text in the report and in compare's output."""

from __future__ import annotations

from typing import Any

from cladebench.evaluate.labels import distinct_labels


def test_an_unset_or_default_setting_is_never_named() -> None:
    configs: list[dict[str, Any]] = [{"where": None, "group_key": "auto", "dataset": "d"},
                                     {"where": "kingdom = 'Plantae'", "group_key": "auto", "dataset": "d"},
                                     {"where": None, "group_key": "genus", "dataset": "d"}]
    labels = distinct_labels(["bioclip"] * 3, configs, ["a", "b", "c"], ["fewshot"] * 3)
    assert labels == ["bioclip", "bioclip · where kingdom = 'Plantae'", "bioclip · group-key genus"]
    assert not any("None" in label or "auto" in label for label in labels)


def test_runs_of_two_tasks_with_one_label_keep_it() -> None:
    configs: list[dict[str, Any]] = [{"rank": None, "name_style": "sci", "dataset": "d"},
                                     {"rerank_k": 10, "dataset": "d"}]
    assert distinct_labels(["bioclip", "bioclip"], configs, ["a", "b"], ["zeroshot", "rerank"]) == [
        "bioclip", "bioclip"]
    # without tasks (a caller that compares one task's runs), a setting only one run has is named on that run alone
    assert distinct_labels(["bioclip", "bioclip"], configs, ["a", "b"]) == [
        "bioclip · name-style sci", "bioclip · rerank-k 10"]
