"""A task setting out of range is a usage error: exit 2 with one line naming the option, refused before any
dataset is opened or any run is read (the paths below do not exist, which would be exit 3 or 1 otherwise)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cladebench.cli import main

EVAL_CASES: list[tuple[list[str], str]] = [
    (["fewshot", "--shots", "0"], "--shots must be at least 1, got 0"),
    (["fewshot", "--shots", "1", "5", "1"], "--shots"),
    (["fewshot", "--shots", "-3"], "--shots"),
    (["fewshot", "--repetitions", "0"], "--repetitions must be at least 1, got 0"),
    (["fewshot", "--repetitions", "-2"], "--repetitions"),
    (["fewshot", "--seed", "-1"], "--seed must be at least 0, got -1"),
    (["fewshot", "--knn-k", "0"], "--knn-k"),
    (["fewshot", "--linear-folds", "1"], "--linear-folds must be at least 2"),
    (["fewshot", "--min-test-per-class", "0"], "--min-test-per-class"),
    (["fewshot", "--linear-cs", "0", "1"], "--linear-cs"),
    (["fewshot", "--linear-cs", "nan"], "--linear-cs"),
    (["fewshot", "--linear-fallback-c", "-1"], "--linear-fallback-c"),
    (["fewshot", "--methods", "simpelshot"], "simpleshot"),
    (["retrieval", "-k", "0"], "-k must be at least 1, got 0"),
    (["retrieval", "--group-key", ""], "--group-key"),
    (["geo", "--prior-cell-km", "0"], "--prior-cell-km"),
    (["geo", "--prior-cell-km", "nan"], "--prior-cell-km"),
    (["geo", "--prior-cell-km", "0.5"], "--prior-cell-km must be at least 5 km"),
    (["geo", "--prior-neighbourhood-km", "-500"], "--prior-neighbourhood-km"),
    (["geo", "--prior-season-bins", "0"], "--prior-season-bins must be at least 1"),
    (["geo", "--prior-alpha", "0"], "--prior-alpha"),
    (["geo", "--prior-alpha", "inf"], "--prior-alpha"),
    (["geo", "--prior-split", "0.5", "0.5"], "--prior-split takes three shares"),
    (["geo", "--prior-split", "-1", "1", "1"], "--prior-split"),
    (["geo", "--prior-split", "0", "0", "0"], "--prior-split"),
    (["geo", "--prior-seed", "-4"], "--prior-seed"),
    (["geo", "--prior-weight-steps", "1"], "--prior-weight-steps must be at least 2"),
    (["rerank", "--rerank-k", "0"], "--rerank-k must be at least 1"),
    (["rerank", "--vlm-concurrency", "0"], "--vlm-concurrency must be at least 1"),
    (["lineage", "--vlm-concurrency", "-1"], "--vlm-concurrency"),
]


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(args)
    return code, capsys.readouterr().err


@pytest.mark.parametrize(("options", "says"), EVAL_CASES, ids=[" ".join(o) for o, _ in EVAL_CASES])
def test_eval_settings_out_of_range_exit_2_naming_the_option(options: list[str], says: str, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    task, *options = options
    code, err = run(["eval", task, str(tmp_path / "missing.lance"), "--model",
                     "openai-compatible:x@http://127.0.0.1:9/v1", "--out", str(tmp_path / "run"), *options], capsys)
    assert code == 2, err
    assert says in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("options", "says"), [
    (["--resamples", "0"], "--resamples must be at least 1, got 0"),
    (["--alpha", "1.5"], "--alpha"),
    (["--alpha", "0"], "--alpha"),
    (["--seed", "-1"], "--seed"),
])
def test_compare_settings_out_of_range_exit_2(options: list[str], says: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(["compare", str(tmp_path / "a"), str(tmp_path / "b"), *options], capsys)
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(("options", "says"), [
    (["--shots", "0"], "--shots"),
    (["--repetitions", "0"], "--repetitions"),
    (["--methods", "nope"], "few-shot method"),
])
def test_compare_columns_settings_out_of_range_exit_2(options: list[str], says: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from helpers.planted_embeddings import write_planted_dataset

    write_planted_dataset(tmp_path / "planted.lance")
    code, err = run(["compare-columns", str(tmp_path / "planted.lance"), *options], capsys)
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1


def test_the_checks_themselves() -> None:
    import doctest

    from cladebench import config as option_checks
    from cladebench.errors import UsageError

    assert doctest.testmod(option_checks).failed == 0
    for check, value in ((option_checks.at_least, 1.5), (option_checks.at_least, True),
                         (option_checks.positive, float("nan")), (option_checks.positive, 0.0),
                         (option_checks.non_negative, -0.1), (option_checks.non_negative, float("inf"))):
        with pytest.raises(UsageError, match="--opt"):
            check("--opt", value, 1) if check is option_checks.at_least else check("--opt", value)
    option_checks.at_least("--opt", 3, 1)
    option_checks.positive("--opt", 0.5)
    option_checks.non_negative("--opt", 0)
