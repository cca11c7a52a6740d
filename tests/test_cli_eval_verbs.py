"""Verbs shaped by task: `eval <task>` and `load <source>` take only their own options, abbreviations are
refused, the old `eval DATASET --task T` is refused in one line, and whatever can be checked without a model
is refused before torch is imported."""

from __future__ import annotations

from pathlib import Path

import pytest

from cladebench.benchmarks import BENCHMARKS
from cladebench.cli import FAMILIES, VERBS, main
from cladebench.errors import UnknownNameError, UsageError
from cladebench.evaluate.configs import EVAL_CONFIGS, GeoEvalConfig, RerankEvalConfig, ZeroShotEvalConfig, eval_config
from cladebench.registry import Registry
from helpers.before_model import run_before_model
from helpers.toy_dataset import write_toy_dataset


def help_text(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--help"])
    assert exited.value.code == 0
    return capsys.readouterr().out


def usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    return err


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return write_toy_dataset(tmp_path / "toy.lance")


# --- one config per task ---------------------------------------------------------------------------


def test_every_registered_task_has_its_own_eval_config() -> None:
    from cladebench.tasks import all_tasks, get_task

    assert set(EVAL_CONFIGS) == set(all_tasks())  # each task is loaded when first asked for: all of them here
    for name, config in EVAL_CONFIGS.items():
        assert issubclass(config, get_task(name).config) and config.task == name


@pytest.mark.parametrize(("task", "own", "foreign"), [
    ("zeroshot", "--name-style", ["--shots", "--rerank-k", "--prior-cell-km", "--vlm-prompt", "-k"]),
    ("fewshot", "--shots", ["--name-style", "--rerank-k", "--prior-cell-km", "--lineage-prompt"]),
    ("retrieval", "--group-key", ["--shots", "--templates", "--prior-alpha"]),
    ("rerank", "--rerank-k", ["--shots", "--rank", "--prior-cell-km", "--lineage-prompt"]),
    ("lineage", "--lineage-prompt", ["--shots", "--rerank-k", "--prior-cell-km", "--rank"]),
    ("geo", "--prior-cell-km", ["--shots", "--rerank-k", "--vlm-prompt"]),
])
def test_eval_task_help_lists_only_its_own_options(task: str, own: str, foreign: list[str],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    text = help_text(["eval", task], capsys)
    assert f"usage: cladebench eval {task}" in text and own in text and "--breakdown" in text
    options = {word.rstrip(",") for word in text.split() if word.startswith("-")}
    assert not options & set(foreign), options & set(foreign)
    assert len(text.splitlines()) < 72  # a screen (and the global --quiet): each option's first sentence, daily first


def test_another_task_s_option_is_refused_not_ignored(dataset: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(["eval", "zeroshot", str(dataset), "--out", str(tmp_path / "run"), "--shots", "1"], capsys)
    assert "unrecognized arguments: --shots 1" in err


def test_every_eval_help_fits_a_screen_with_the_daily_options_first(capsys: pytest.CaptureFixture[str]) -> None:
    for name in FAMILIES["eval"].members():
        text = help_text(["eval", name], capsys)
        assert len(text.splitlines()) < 72, (name, len(text.splitlines()))
        options = [line.split()[0] for line in text.splitlines() if line.startswith("  --")]
        assert options.index("--out") < 5 and options.index("--model") < 5, (name, options[:6])


def test_a_benchmark_knows_its_task_and_dataset(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_text(["eval", "inquire-rerank"], capsys)
    assert "--rerank-k" in text and "--shots" not in text and "positional arguments" not in text  # no DATASET
    assert {"inquire-rerank", "inat-coobserved"} <= set(FAMILIES["eval"].members())
    assert eval_config(dataset="inquire-rerank", out=Path("o")).task == "rerank"
    assert eval_config(dataset="somewhere.lance", out=Path("o")).task == "zeroshot"
    assert type(eval_config(task="geo", dataset="d", out=Path("o"))) is GeoEvalConfig
    with pytest.raises(UnknownNameError, match="Did you mean 'rerank'"):
        eval_config(task="rerankk", dataset="d", out=Path("o"))


def test_config_values_are_refused_when_the_config_is_built() -> None:
    with pytest.raises(UsageError, match="--prior-cell-km"):
        GeoEvalConfig(dataset="d", out=Path("o"), prior_cell_km=0)
    with pytest.raises(UsageError, match="--rerank-k"):
        RerankEvalConfig(dataset="d", out=Path("o"), rerank_k=0)
    with pytest.raises(UnknownNameError, match="rank 'specis'"):
        ZeroShotEvalConfig(dataset="d", out=Path("o"), rank="specis")
    with pytest.raises(UsageError, match="--within takes RANK=NAME"):
        ZeroShotEvalConfig(dataset="d", out=Path("o"), within="Aves")
    with pytest.raises(UsageError, match="--breakdown lists a column twice"):
        ZeroShotEvalConfig(dataset="d", out=Path("o"), breakdown=("a", "a"))
    with pytest.raises(UsageError, match="one SQL expression"):
        ZeroShotEvalConfig(dataset="d", out=Path("o"), where="1=1; DROP TABLE x")


# --- one spelling ------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [
    ["eval", "DS", "--task", "fewshot", "--out", "o"],
    ["eval", "zeroshot", "DS", "--out", "o", "--task", "fewshot"],
])
def test_the_old_eval_form_is_refused_in_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(argv, capsys)
    assert "unknown task or benchmark 'DS'" in err or "unrecognized arguments: --task fewshot" in err


@pytest.mark.parametrize(("argv", "message"), [
    (["eval", "zeroshot", "DS", "--out", "o", "--rank", "genus", "--rank", "family"], "argument --rank: given twice"),
    (["eval", "zeroshot", "DS", "--out", "o", "--out", "p"], "argument --out: given twice"),
    (["eval", "zeroshot", "DS", "--out", "o", "--unseen-only", "--no-unseen-only"], "are both given"),
])
def test_a_setting_given_twice_is_refused_not_overwritten(argv: list[str], message: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert message in usage_error(argv, capsys)


def test_a_repeated_list_option_accumulates() -> None:
    from cladebench.cli import build_parser
    from cladebench.config import config_from_args

    args = build_parser().parse_args(["eval", "zeroshot", "DS", "--out", "o", "--breakdown", "genus",
                                      "--breakdown", "family", "--rank", "genus"])
    config = config_from_args(ZeroShotEvalConfig, args)
    assert config.breakdown == ("genus", "family")
    assert set(config.given) == {"dataset", "out", "breakdown", "rank"}  # the defaults left alone are not given


# --- no abbreviations ----------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [
    ["eval", "zeroshot", "DS", "--ou", "o"],
    ["eval", "fewshot", "DS", "--out", "o", "--shot", "1"],
    ["info", "DS", "--js"],
    ["load", "crypticbio", "f.csv", "--out", "o", "--look", "l.tsv"],
    ["--deb", "info", "DS"],
])
def test_abbreviated_options_are_refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(argv, capsys)
    assert "unrecognized arguments" in err or "required: --out" in err  # `--ou` was not read as --out


# --- load: one config per source -------------------------------------------------------------------------


def test_every_source_has_its_own_load_config(capsys: pytest.CaptureFixture[str]) -> None:
    from cladebench.curate.sources import SOURCES, load_config

    members = FAMILIES["load"].members()
    assert set(SOURCES) == set(members)
    configs = {name: source.config() for name, source in SOURCES.items()}
    assert len(set(configs.values())) == len(configs)  # one config per source, none shared
    assert all(c.__module__ == load_config.__name__ and members[n].config is c for n, c in configs.items())
    crypticbio = help_text(["load", "crypticbio"], capsys)
    assert "--lookup" in crypticbio and "--concurrency" in crypticbio and "--queries" not in crypticbio
    inquire = help_text(["load", "inquire-rerank"], capsys)
    assert "--queries" in inquire and "--limit" not in inquire and "--ray" not in inquire


def test_an_option_the_source_does_not_take_is_a_usage_error(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(["load", "inquire-rerank", str(tmp_path), "--out", str(tmp_path / "o"), "--limit", "5"], capsys)
    assert "--limit" in err
    assert main(["load", "crypticbio", "f.csv", "--out", str(tmp_path / "o"), "--retries", "0"]) == 2
    assert "--retries must be at least 1" in capsys.readouterr().err


def test_the_registries_are_registries() -> None:
    for registry in (VERBS, FAMILIES, BENCHMARKS, EVAL_CONFIGS):
        assert isinstance(registry, Registry)


# --- checked before any model ------------------------------------------------------------------------



def test_mistakes_found_without_a_model_fail_before_torch_loads(dataset: Path, tiny_model: str,
                                                                tmp_path: Path) -> None:
    """Each command names the real (tiny) model: had it loaded, torch would be in sys.modules."""
    out = str(tmp_path / "run")
    base = ["eval", "zeroshot", str(dataset), "--model", tiny_model, "--out", out, "--device", "cpu"]
    cases = [
        ([*base, "--breakdown", "nope"], 2),
        ([*base, "--group-by", "nope"], 2),
        ([*base, "--group-by", "emb_toy"], 2),
        ([*base, "--where", "nope = 1"], 2),
        ([*base, "--where", "species = = 1"], 2),
        ([*base, "--rank", "specis"], 2),
        ([*base, "--within", "Aves"], 2),
        ([*base, "--logit-scale", "0"], 2),
        ([*base, "--column", "emb_nope"], 4),
        ([*base, "--candidates", "nope"], 4),
        ([*base, "--labels", str(tmp_path / "no-labels.csv")], 1),
        (["eval", "geo", str(dataset), "--model", tiny_model, "--out", out, "--prior-cell-km", "0"], 2),
        (["eval", "rerank", str(dataset), "--model", tiny_model, "--out", out, "--where", "nope = 1"], 2),
        (["search", str(dataset), "--model", tiny_model], 2),
        (["search", str(dataset), "a bird", "--model", tiny_model, "--where", "nope = 1"], 2),
        (["search", str(dataset), "a bird", "--model", tiny_model, "-k", "0"], 2),
    ]
    outcomes, errors = run_before_model([argv for argv, _ in cases])
    assert len(errors) == len(cases), errors  # one line each
    for (argv, code), (got, torch_loaded), line in zip(cases, outcomes, errors, strict=True):
        assert (got, torch_loaded) == (code, False), (argv[3:], line)
        assert "internal error" not in line
    assert not Path(out).exists()


def test_a_mistyped_task_or_source_names_the_closest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv, says in ((["eval", "zeroshoot", "data.lance", "--out", str(tmp_path / "o")], "'zeroshot'"),
                       (["load", "crypticbi", "f.csv", "--out", str(tmp_path / "o")], "'crypticbio'"),
                       (["evl"], "'eval'")):
        with pytest.raises(SystemExit) as refused:
            main(argv)
        err = capsys.readouterr().err
        assert refused.value.code == 2 and f"Did you mean {says}?" in err and len(err.strip().splitlines()) == 1
        assert "old form" not in err
    assert not (tmp_path / "o").exists()


def test_a_benchmark_has_one_name_in_build_and_eval_with_the_old_one_kept() -> None:
    from cladebench.cli import build_parser

    for name, old in (("inat-coobserved", "coobserved"), ("fine-grained-challenges", "finegrained")):
        assert name in FAMILIES["build"].members() and name in BENCHMARKS
        assert FAMILIES["build"].member(old).name == name
    args = build_parser().parse_args(["build", "coobserved", "--export-dir", "x", "--out", "o"])
    assert FAMILIES["build"].member(args.kind).name == "inat-coobserved"
