"""The command line attacked as a user would: the new `eval <task>` form and its old spelling, mistakes that are
found before any model (or torch) loads, and the species binomial on hostile data, each ending in one line and its
documented exit code, never 70."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from cladebench import store
from cladebench.cli import main
from helpers.before_model import run_before_model
from helpers.toy_dataset import write_toy_dataset


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    """Exit code and the non-blank lines of stderr (argparse's refusals exit through SystemExit)."""
    try:
        code = main(argv)
    except SystemExit as exited:
        code = int(exited.code or 0)
    return code, [line for line in capsys.readouterr().err.splitlines() if line.strip()]


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return write_toy_dataset(tmp_path / "toy.lance", with_latitude=True)


# --- the verbs by task ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("argv", "option", "owner"), [
    (["eval", "zeroshot", "D", "--out", "o", "--shots", "1"], "--shots", "eval fewshot"),
    (["eval", "fewshot", "D", "--out", "o", "--rerank-k=3"], "--rerank-k", "eval rerank"),
    (["eval", "retrieval", "D", "--out", "o", "--prior-cell-km", "3"], "--prior-cell-km", "eval geo"),
    (["eval", "inquire-rerank", "--out", "o", "--shots", "2"], "--shots", "eval fewshot"),
    (["load", "inquire-rerank", "D", "--out", "o", "--concurrency", "2"], "--concurrency", "load crypticbio"),
    (["eval", "zeroshot", "D", "--out", "o", "--conditions", "nohint"], "--conditions", "eval lineage"),
])
def test_another_member_s_option_names_where_it_belongs(argv: list[str], option: str, owner: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(argv, capsys)
    command = " ".join(argv[:2])
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"cladebench {command}: error: unrecognized arguments: {option}"), err
    owners = err[0].split(f"({option} is an option of ", 1)[-1].split(";")[0].split(", ")
    assert owner in owners and f"see cladebench {command} --help" in err[0], err  # in registration order


def test_an_option_no_member_takes_names_only_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(["eval", "retrieval", "D", "--out", "o", "--nope", "1"], capsys)
    assert code == 2 and err == ["cladebench eval retrieval: error: unrecognized arguments: --nope 1 "
                                 "(see cladebench eval retrieval --help)"]


# --- one spelling ----------------------------------------------------------------------------------------


def test_the_old_eval_form_is_one_line_and_writes_nothing(tmp_path: Path, dataset: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "run")
    for argv in (["eval", "zeroshot", str(dataset), "--out", out, "--task", "fewshot"],
                 ["eval", str(dataset), "--out", out, "--task"],
                 ["eval", str(dataset), "--task", "--out", out]):
        code, err = run(argv, capsys)
        assert code == 2 and len(err) == 1, (argv, err)
        assert "--task" in err[0] or "unknown task or benchmark" in err[0], err
    assert not Path(out).exists()


# --- checked before any model -------------------------------------------------------------------------



def test_more_mistakes_fail_before_torch_loads(dataset: Path, tiny_model: str, tmp_path: Path) -> None:
    """Each command names the real (tiny) model: had it loaded, torch would be in sys.modules."""
    out = str(tmp_path / "run")
    one_label = tmp_path / "one.csv"
    one_label.write_text("species,genus\nGenus sp0,Genus\n")
    not_utf8 = tmp_path / "labels.txt"
    not_utf8.write_bytes(b"Genus sp0\n\xff\xfe\n")
    header_only = tmp_path / "header.csv"
    header_only.write_text("x\n")
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "gone")
    base = ["eval", "zeroshot", str(dataset), "--model", tiny_model, "--out", out, "--device", "cpu"]
    geo = ["eval", "geo", str(dataset), "--model", tiny_model, "--out", out, "--device", "cpu"]
    cases = [
        ([*base, "--candidates", "species"], 2, "not a list of scientific names"),
        ([*base, "--templates", "nosuch"], 2, "unknown template set 'nosuch'"),
        ([*base, "--run-name", "x" * 5_000], 2, "--run-name is 5,000 characters long"),
        ([*base[:-3], str(dangling), "--device", "cpu"], 1, f"{dangling} is a symbolic link to {tmp_path / 'gone'}"),
        ([*base, "--templates", ""], 2, "unknown template set ''"),
        ([*base, "--name-style", "nope"], 2, "unknown name style 'nope'"),
        ([*base, "--labels", str(one_label)], 1, "1 label(s) at rank species"),
        ([*base, "--labels", str(header_only)], 1, "0 label(s)"),
        ([*base, "--labels", str(not_utf8)], 1, "not UTF-8"),
        ([*base, "--labels", str(tmp_path)], 1, "file not found"),
        ([*base, "--where", "nope = 1"], 2, "--where 'nope = 1': no column 'nope'"),
        ([*base, "--where", "specis = 'x'"], 2, "did you mean 'species'?"),
        ([*base, "--where", "species = 'nothing'"], 1, "no row of"),
        ([*base, "--unseen-only"], 1, "no row of"),
        ([*base, "--within", "genus=Nope"], 1, "selected by --within genus=Nope"),
        ([*base, "--group-by", "none", "--where", "species = 'nothing'"], 1, "no row of"),
        ([*geo, "--prior-season-bins", "99999999999"], 2, "--prior-season-bins must be at most 366"),
        ([*geo, "--prior-fit-where", "nope = 1"], 2, "--prior-fit-where 'nope = 1': no column 'nope'"),
        ([*geo, "--prior-fit-where", "species = 'a"], 2, "--prior-fit-where"),
        ([*geo, "--prior-dataset", str(tmp_path / "missing.lance")], 3, "no dataset at"),
        ([*geo, "--prior-fusion", "embedding_sum"], 1, "location-embedding column"),
        (["eval", "rerank", str(dataset), "--model", tiny_model, "--out", out, "--query-templates", "nosuch"], 2,
         "unknown template set"),
        (["eval", "fewshot", str(dataset), "--model", tiny_model, "--out", out, "--group-key", " "], 2,
         "--group-key is empty"),
        (["eval", "retrieval", str(dataset), "--model", tiny_model, "--out", out, "--group-key", "emb_toy"], 2,
         "is a column of vectors"),
        ([*geo, "--prior-group-key", "emb_toy"], 2, "is a column of vectors"),
        (["search", str(dataset), "a bird", "--model", tiny_model, "-k", "99999999999999999999"], 2,
         "-k must be at most"),
        (["search", str(dataset), "a bird", "--model", tiny_model, "--templates", "nosuch"], 2,
         "unknown template set"),
    ]
    outcomes, errors = run_before_model([argv for argv, _, _ in cases])
    assert len(errors) == len(cases), errors  # one line each
    for (argv, code, says), (got, torch_loaded), line in zip(cases, outcomes, errors, strict=True):
        assert (got, torch_loaded) == (code, False), (argv[3:], line)
        assert says in line and "_rowid" not in line, (argv[3:], line)
    assert not Path(out).exists()


def test_within_evaluates_only_the_groups_that_hold_the_clade(tmp_path: Path, tiny_model: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """--within a genus found in one challenge group: that group is evaluated, instead of the first group without
    the genus failing the whole run after the model loaded."""
    n = 16
    genus = ["Felis"] * 8 + ["Panthera"] * 8
    field = store.embedding_field("emb_tiny", 32, {"model": tiny_model})
    vectors = np.random.default_rng(2).normal(size=(n, 32)).astype(np.float32)
    table = pa.table({
        "uuid": [f"u{i:02d}" for i in range(n)], "image": pa.array([b"x"] * n, pa.large_binary()),
        "kingdom": ["Animalia"] * n, "family": ["Felidae"] * n, "genus": genus,
        "species": [f"{g} {e}" for g, e in zip(genus, ["catus", "margarita"] * 4 + ["leo", "pardus"] * 4,
                                                 strict=True)],
        "challenge_group": ["cats"] * 8 + ["big cats"] * 8,
    }).append_column(field, pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 32))
    path = tmp_path / "cats.lance"
    store.write_dataset(table, path)
    code, err = run(["eval", "zeroshot", str(path), "--model", tiny_model, "--out", str(tmp_path / "run"),
                     "--device", "cpu", "--within", "genus=Panthera"], capsys)
    assert code == 0, err
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["provenance"]["groups"]["values"] == ["big cats"]
    assert record["provenance"]["dataset"]["evaluated_rows"] == 8


def test_a_blank_where_is_no_filter_as_everywhere_else(dataset: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(["eval", "retrieval", str(dataset), "--column", "emb_toy", "--out", str(tmp_path / "run"),
                     "--where", "   ", "-k", "2"], capsys)
    assert code == 0, err
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["provenance"]["dataset"]["evaluated_rows"] == 12


# --- species is the binomial: hostile data ------------------------------------------------------------------


def test_zero_shot_on_a_dataset_without_some_rank_columns(tmp_path: Path, tiny_model: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """No phylum, class or order column: those ranks are not scored, instead of an argmax over no taxa (exit 70)."""
    import lance

    n = 12
    genus = ["Felis", "Felis", "Panthera", "Panthera"] * 3
    species = ["catus", "Felis silvestris", "leo", "× hybrida"] * 3  # an epithet, a binomial, a hybrid
    field = store.embedding_field("emb_tiny", 32, {"model": tiny_model})
    vectors = np.random.default_rng(1).normal(size=(n, 32)).astype(np.float32)
    table = pa.table({
        "uuid": [f"u{i:02d}" for i in range(n)], "image": pa.array([b"x"] * n, pa.large_binary()),
        "kingdom": ["Animalia"] * n, "family": ["Felidae"] * n, "genus": genus, "species": species,
    }).append_column(field, pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 32))
    path = tmp_path / "old.lance"
    lance.write_dataset(table.replace_schema_metadata({store.SCHEMA_METADATA_KEY: b"1"}), str(path))
    out = tmp_path / "run"
    code, err = run(["eval", "zeroshot", str(path), "--model", tiny_model, "--out", str(out), "--device", "cpu",
                     "--where", "species = 'Felis silvestris' OR species = 'Felis catus'"], capsys)
    assert code == 0, err
    record = json.loads((out / "run.json").read_text())
    assert record["provenance"]["dataset"]["evaluated_rows"] == 6  # the binomial, read from the epithet, matched
    assert {"top1_species", "top1_genus", "top1_family"} <= set(record["metrics"])
    assert not any(name.endswith(("_phylum", "_class", "_order")) for name in record["metrics"])
