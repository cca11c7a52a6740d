"""Options in two tiers: `eval TASK --help` shows at most 15 options, every setting is also given by key
(`--setting KEY=VALUE`, `--settings FILE.toml`) through the same checks, and what a run records does not depend on
the tier that set a value."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from cladebench.cli import FAMILIES, evaluation, main
from cladebench.config import setting_fields, shown_options
from cladebench.evaluate.configs import EVAL_CONFIGS
from helpers.toy_dataset import write_toy_dataset

MOST_OPTIONS = 15
TIER_OPTIONS = ["--setting", "--settings", "--verbose", "--quiet"]
"""The options every tiered help lists besides the config's shown fields."""
REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "reference.md"


def help_text(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 0
    return capsys.readouterr().out


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    return err


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The configs `eval` would run, captured instead of run (the command line up to the evaluation)."""
    configs: list[Any] = []
    monkeypatch.setattr(evaluation, "_eval", lambda config: configs.append(config) or 0)
    return configs


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return write_toy_dataset(tmp_path / "toy.lance")


# --- the shown tier --------------------------------------------------------------------------------


def test_every_eval_help_shows_at_most_15_options_and_ends_with_where_every_setting_is(
        capsys: pytest.CaptureFixture[str]) -> None:
    for name, member in FAMILIES["eval"].members().items():
        text = help_text(["eval", name, "--help"], capsys)
        options = [line.split()[0].rstrip(",") for line in text.splitlines() if line.startswith("  -")]
        options.remove("-h")
        assert len(options) <= MOST_OPTIONS, (name, len(options), options)
        config = member.config_class()
        shown = ["-k" if key == "k" else "--" + key.replace("_", "-") for key in shown_options(config) or ()]
        assert options == shown + TIER_OPTIONS, (name, options)
        last = text.strip().splitlines()[-1]
        assert last == f"All {len(setting_fields(config))} settings: cladebench eval {name} --settings-help (or " \
                       "docs/reference.md)", (name, last)


@pytest.mark.parametrize("task", sorted(EVAL_CONFIGS))
def test_settings_help_lists_every_setting_with_the_shown_ones_marked(task: str,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    text = help_text(["eval", task, "--settings-help"], capsys)
    config = EVAL_CONFIGS[task]
    listed = re.findall(r"^  (\w+)( \*)? \(", text, flags=re.MULTILINE)
    assert [key for key, _ in listed] == [f.name for f in setting_fields(config)]
    assert {key for key, star in listed if star} == set(shown_options(config) or ()) - {"out"}  # out: required
    assert all(len(line) <= 120 for line in text.splitlines())


def test_the_reference_lists_every_setting_of_every_task() -> None:
    reference = REFERENCE.read_text("utf-8")
    section = reference[reference.index("### eval settings\n"):]
    section = section[:section.index("\n## ")]
    for task, config in EVAL_CONFIGS.items():
        part = section[section.index(f"#### eval {task}\n"):]
        part = part[:part.index("\n#### ")] if "\n#### " in part else part
        missing = [f.name for f in setting_fields(config) if f"| `{f.name}` |" not in part]
        assert not missing, (task, missing)


# --- one config whatever the tier --------------------------------------------------------------------


@pytest.mark.parametrize(("task", "flag", "word", "toml"), [
    ("zeroshot", ["--rank", "genus"], "rank=genus", 'rank = "genus"'),
    ("zeroshot", ["--stream", "always"], "stream=always", 'stream = "always"'),
    ("fewshot", ["--shots", "1", "2"], "shots=1,2", "shots = [1, 2]"),
    ("fewshot", ["--no-unseen-only"], "unseen_only=false", "unseen_only = false"),
    ("geo", ["--prior-cell-km", "50"], "prior-cell-km=50", "prior_cell_km = 50"),
    ("retrieval", ["-k", "3"], "k=3", "k = 3"),
])
def test_a_setting_reaches_the_same_config_in_every_tier(task: str, flag: list[str], word: str, toml: str,
                                                         built: list[Any], tmp_path: Path) -> None:
    base = ["eval", task, "DS", "--out", "o"]
    (tmp_path / "s.toml").write_text(toml + "\n", encoding="utf-8")
    for argv in ([*base, *flag], [*base, "--setting", word], [*base, "--settings", str(tmp_path / "s.toml")]):
        assert main(argv) == 0
    by_flag, by_word, by_file = built
    assert by_flag == by_word == by_file
    assert by_flag.given == by_word.given == by_file.given  # the setting counts as given in every tier


def test_a_named_benchmark_takes_settings_by_key_through_the_same_checks(built: list[Any],
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "inquire-rerank", "--out", "o", "--setting", "vlm_concurrency=2"]) == 0
    assert built[0].vlm_concurrency == 2 and "vlm_concurrency" in built[0].given
    err = refused(["eval", "inquire-rerank", "--out", "o", "--setting", "vlm_concurency=2"], capsys)
    assert "has no setting 'vlm_concurency'; closest: vlm_concurrency" in err


# --- refusals, one line each ---------------------------------------------------------------------------


def test_an_unknown_key_names_the_closest_known_keys(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    err = refused(["eval", "zeroshot", "DS", "--out", "o", "--setting", "strem=always"], capsys)
    assert "--setting strem=always: cladebench eval zeroshot has no setting 'strem'; closest: stream" in err
    (tmp_path / "s.toml").write_text("repetiton = 1\n", encoding="utf-8")
    err = refused(["eval", "fewshot", "DS", "--out", "o", "--settings", str(tmp_path / "s.toml")], capsys)
    assert "repetiton" in err and "closest: repetitions" in err


@pytest.mark.parametrize(("argv", "said"), [
    (["--setting", "image-block=x"], "--setting image-block=x: expected an integer, got 'x'"),
    (["--setting", "image_block=0"], "--setting image_block=0: --image-block must be at least 1, got 0"),
    (["--setting", "stream=sometimes"], "--setting stream=sometimes: --stream must be one of"),
    (["--setting", "rank"], "--setting 'rank': expected KEY=VALUE"),
    (["--setting", "rank=genus", "--setting", "rank=family"], "--setting names rank twice"),
    (["--rank", "genus", "--setting", "rank=family"], "rank is given twice (--rank genus and --setting rank=family)"),
])
def test_a_bad_value_names_the_key_as_typed(argv: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert said in refused(["eval", "zeroshot", "DS", "--out", "o", *argv], capsys)


@pytest.mark.parametrize(("text", "said"), [
    ("image_block = 0\n", "image_block: --image-block must be at least 1, got 0"),
    ("rank = [\"genus\"]\n", "rank: expected one value, got a list"),
    ("rank = \n", "not TOML (Invalid value"),
    ('{"rank": "genus"}\n', "not TOML"),
    ("[zeroshot]\nrank = \"genus\"\n", "[zeroshot] is a table; give each setting as KEY = VALUE"),
    (b"rank = \"g\xffnus\"\n", "cannot be read as UTF-8 text"),
    (None, "no such file"),
])
def test_a_settings_file_that_cannot_be_read_is_one_line(text: str | bytes | None, said: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.toml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    elif text is not None:
        path.write_text(text, encoding="utf-8")
    err = refused(["eval", "zeroshot", "DS", "--out", "o", "--settings", str(path)], capsys)
    assert f"--settings {path}: " in err and said in err


def test_a_hostile_key_is_said_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(["eval", "zeroshot", "DS", "--out", "o", "--setting", "ra\nnk=genus\x1b[2J"], capsys)
    assert len(err.strip().splitlines()) == 1 and "\x1b" not in err
    assert "--setting 'ra\\nnk=genus\\x1b[2J': " in err


@pytest.mark.parametrize(("make", "said"), [
    (lambda tmp: Path("/dev/zero"), "not a regular file"),  # endless: never read into memory
    (lambda tmp: tmp, "not a regular file"),
    (lambda tmp: (tmp / "big.toml", (tmp / "big.toml").write_text("# x\n" * 400_000))[0], "larger than 1,048,576"),
])
def test_a_settings_path_that_is_no_small_file_is_refused_unread(make, said: str, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = make(tmp_path)
    err = refused(["eval", "zeroshot", "DS", "--out", "o", "--settings", str(path)], capsys)
    assert f"--settings {path}: " in err and said in err


def test_the_suite_s_unknown_setting_names_the_closest_keys(capsys: pytest.CaptureFixture[str],
                                                             tmp_path: Path) -> None:
    err = refused(["suite", "--model", "bioclip", "--out", str(tmp_path / "o"), "--setting", "repetiton=1"], capsys)
    assert "--setting repetiton=1: no task of the suite" in err and "closest: repetitions" in err
    assert not (tmp_path / "o").exists()


# --- what a run records -----------------------------------------------------------------------------------


def test_a_run_records_the_same_config_whichever_tier_set_a_value(dataset: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "s.toml").write_text('rank = "genus"\ncolumn = "emb_toy"\n', encoding="utf-8")
    tiers = {"flag": ["--rank", "genus", "--column", "emb_toy"],
             "setting": ["--setting", "rank=genus", "--setting", "column=emb_toy"],
             "file": ["--settings", str(tmp_path / "s.toml")]}
    records = {}
    for name, argv in tiers.items():
        (tmp_path / name).mkdir()
        monkeypatch.chdir(tmp_path / name)  # --out run: the same path as given in each record
        assert main(["eval", "retrieval", str(dataset), "--out", "run", "--group-by", "none", *argv]) == 0, \
            capsys.readouterr().err
        records[name] = json.loads((tmp_path / name / "run" / "run.json").read_text("utf-8"))
    flag = records["flag"]
    assert flag["config"]["rank"] == "genus" and flag["config"]["column"] == "emb_toy"
    for other in (records["setting"], records["file"]):
        assert other["config"] == flag["config"]
        assert other["label"] == flag["label"] and other["metrics"] == flag["metrics"]
        different = {key for key in flag["provenance"] if flag["provenance"][key] != other["provenance"][key]}
        assert different <= {"command"}, different  # at most the command as typed
