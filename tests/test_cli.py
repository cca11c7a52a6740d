"""The CLI as a script sees it: real subprocesses, real datasets, exit codes and messages."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from cladebench import store
from cladebench.cli import VERBS


def run(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "cladebench", *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout, check=False)


@pytest.fixture
def dataset_path(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    n = 30
    vectors = rng.normal(size=(n, 8)).astype(np.float32)
    table = pa.table({
        "uuid": [f"u{i:03d}" for i in range(n)],
        "image": pa.array([bytes([i]) for i in range(n)], pa.large_binary()),
        "scientific_name": [f"Genus sp{i % 3}" for i in range(n)],
        "challenge_group": ["birds" if i % 3 == 0 else "camera_trap" for i in range(n)],
        "license_name": ["cc-by" if i % 2 else "cc0" for i in range(n)],
    })
    field = store.embedding_field("toy", 8, {"model": "toy-model", "revision": "abc123", "norm_mean": 2.5})
    table = table.append_column(field, pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 8))
    path = tmp_path / "toy.lance"
    ds = store.write_dataset(table, path)
    store.tag(ds, "first")
    return path


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_every_verb_has_help(verb: str) -> None:
    result = run(verb, "--help")
    assert result.returncode == 0, result.stderr
    assert "usage: cladebench " + verb in result.stdout


def test_unknown_verb_is_a_usage_error() -> None:
    result = run("infoo")
    assert result.returncode == 2
    assert "unknown verb 'infoo'" in result.stderr and "Did you mean 'info'?" in result.stderr


def test_info_json_reports_fingerprint_groups_licenses_and_embeddings(dataset_path: Path) -> None:
    result = run("info", str(dataset_path), "--json")
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    expected = hashlib.sha256("".join(f"u{i:03d}\n" for i in range(30)).encode()).hexdigest()
    assert info["fingerprint"] == expected
    assert info["rows"] == 30
    assert info["groups"] == {"challenge_group": {"camera_trap": 20, "birds": 10}}
    assert info["licenses"] == {"cc-by": 15, "cc0": 15}
    emb = info["embeddings"]["emb_toy"]
    assert emb["dim"] == 8 and emb["valid_rows"] == 30
    assert emb["metadata"]["model"] == "toy-model" and emb["metadata"]["norm_mean"] == 2.5
    assert info["tags"] == {"first": 1}
    assert {c["name"] for c in info["schema"]} >= {"uuid", "image", "kingdom", "species", "emb_toy"}


def test_info_text_names_the_model_and_groups(dataset_path: Path) -> None:
    result = run("info", str(dataset_path))
    assert result.returncode == 0, result.stderr
    assert "emb_toy: dim 8, 30 valid rows, model toy-model @ abc123" in result.stdout
    assert "groups: challenge_group (2 values)" in result.stdout


def test_info_at_an_old_version_and_a_tag(dataset_path: Path) -> None:
    extra = pa.table({"uuid": ["new"], "image": pa.array([b"z"], pa.large_binary())})
    store.append(extra, dataset_path)
    latest = json.loads(run("info", str(dataset_path), "--json").stdout)
    by_tag = json.loads(run("info", str(dataset_path), "--json", "--version", "first").stdout)
    by_number = json.loads(run("info", str(dataset_path), "--json", "--version", "1").stdout)
    assert latest["rows"] == 31 and latest["version"] == 2
    assert by_tag["rows"] == by_number["rows"] == 30
    assert by_tag["fingerprint"] == by_number["fingerprint"] != latest["fingerprint"]


def test_info_exit_codes_for_missing_and_non_lance_paths(tmp_path: Path) -> None:
    missing = run("info", str(tmp_path / "nope.lance"))
    assert missing.returncode == 3
    assert "does not exist" in missing.stderr and "Traceback" not in missing.stderr
    (tmp_path / "plain").mkdir()
    plain = run("info", str(tmp_path / "plain"))
    assert plain.returncode == 3
    assert "not a Lance dataset" in plain.stderr


def test_remote_uri_fails_fast_offline() -> None:
    start = time.monotonic()
    result = run("info", "hf://datasets/imageomics/fine-grained-challenges/data/challenges.lance")
    assert time.monotonic() - start < 15
    assert result.returncode == 5
    assert "HF_HUB_OFFLINE" in result.stderr and "Traceback" not in result.stderr


def test_subset_pushes_filter_and_projection(dataset_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "birds.lance"
    result = run("subset", str(dataset_path), "--where", "challenge_group = 'birds'",
                 "--columns", "scientific_name", "emb_toy", "--out", str(out))
    assert result.returncode == 0, result.stderr
    ds = store.open_dataset(out)
    assert ds.schema.names == ["uuid", "scientific_name", "emb_toy"]
    assert ds.count_rows() == 10
    assert store.embedding_metadata(ds.schema.field("emb_toy"))["model"] == "toy-model"
    assert f"fingerprint {store.fingerprint(ds)}" in result.stdout


def test_subset_errors_name_the_problem(dataset_path: Path, tmp_path: Path) -> None:
    bad_column = run("subset", str(dataset_path), "--columns", "no_such", "--out", str(tmp_path / "a"))
    assert bad_column.returncode == 4 and "no_such" in bad_column.stderr
    bad_sql = run("subset", str(dataset_path), "--where", "challenge_group = = 1", "--out", str(tmp_path / "b"))
    assert bad_sql.returncode == 1 and "challenge_group = = 1" in bad_sql.stderr
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    onto_input = run("subset", str(dataset_path), "--out", str(dataset_path))
    assert onto_input.returncode == 2 and "is the input" in onto_input.stderr
    assert run("subset", str(dataset_path), "--out", str(tmp_path / "c")).returncode == 0
    exists = run("subset", str(dataset_path), "--out", str(tmp_path / "c"))
    assert exists.returncode == 1 and "already exists" in exists.stderr
    missing_out = run("subset", str(dataset_path))
    assert missing_out.returncode == 2 and "--out" in missing_out.stderr


def test_ctrl_c_while_the_cli_starts_is_an_interrupt(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A Ctrl-C during the CLI's imports, or while its parser is built, exits 130 with one line."""
    import types

    from cladebench import cli
    from cladebench.__main__ import entry

    class Interrupted(types.ModuleType):
        def __getattr__(self, name: str) -> object:
            raise KeyboardInterrupt

    monkeypatch.setitem(sys.modules, "cladebench.cli", Interrupted("cladebench.cli"))
    assert entry() == 130
    assert capsys.readouterr().err == "cladebench: interrupted\n"
    monkeypatch.setitem(sys.modules, "cladebench.cli", cli)

    def interrupted(*_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert cli.main(["info", "x"]) == 130
    assert capsys.readouterr().err == "cladebench: interrupted\n"


@pytest.mark.parametrize("argv", [["eval", "fewshot", "x", "--out", "o", "--shots", "nan"], ["eval"], ["nosuch"],
                                  ["info", "x", "--repetitions"], ["build"]])
def test_a_command_line_argparse_cannot_read_is_one_line_exit_2(argv: list[str],
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from cladebench.cli import main

    with pytest.raises(SystemExit) as exited:
        main(argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert len(err.strip().splitlines()) == 1 and ": error: " in err and "--help" in err, err


def test_a_reader_that_stops_reading_ends_the_command_quietly(dataset_path: Path) -> None:
    """`cladebench info DS | head`: when the pipe closes, exit 141 (as shells report SIGPIPE), no message."""
    process = subprocess.Popen([sys.executable, "-m", "cladebench", "info", str(dataset_path)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env={**os.environ, "HF_HUB_OFFLINE": "1"})
    process.stdout.close()  # the reader goes away before anything is printed
    stderr = process.communicate(timeout=120)[1].decode()
    assert process.returncode == 141 and stderr == "", stderr


HEAVY_MODULES = ("lance", "numpy", "pyarrow", "scipy", "torch", "open_clip")
"""What a command that only prints help or refuses its command line must not import."""

_EACH_IN_A_FORK = """
import json, os, sys
from cladebench.cli import main
heavy = json.loads(sys.argv[2])
found = {"(parent)": sorted(m for m in heavy if m in sys.modules)}
for argv in json.loads(sys.argv[1]):
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child runs one command and says what it imported
        os.close(read_end)
        sys.stdout = sys.stderr = open(os.devnull, "w")
        try:
            main(argv)
        except BaseException:
            pass
        os.write(write_end, json.dumps(sorted(m for m in heavy if m in sys.modules)).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as answer:
        found[" ".join(argv)] = json.loads(answer.read() or "null")
    os.waitpid(pid, 0)
print(json.dumps(found))
"""


def light_commands() -> list[list[str]]:
    """``cladebench --help``, every verb's help, every member's help (``eval TASK``, ``eval BENCHMARK``, ``load
    SOURCE``, ``build BUILDER``) and usage errors: an unknown verb, member or option, a missing argument."""
    from cladebench.cli import FAMILIES

    commands = [["--help"], ["nosuch"], ["info"], ["info", "--nosuch"], ["subset"]]
    commands += [[name, "--help"] for name in sorted({*VERBS, *FAMILIES})]
    for name, family in FAMILIES.items():
        members = sorted(family.members())
        commands += [[name, "nosuch"], [name, members[0]], [name, members[0], "--nosuch"]]
        commands += [[name, member, "--help"] for member in members]
    return commands


@pytest.mark.skipif(not hasattr(os, "fork"), reason="each command runs in a fork of one light interpreter")
def test_help_and_usage_errors_import_no_heavy_library() -> None:
    """`cladebench --help`, every verb's and member's help and a usage error build only the parser of what is named:
    none of Lance, pyarrow, scipy, torch or open_clip is imported (the modules are asserted, not the time)."""
    commands = light_commands()
    result = subprocess.run([sys.executable, "-c", _EACH_IN_A_FORK, json.dumps(commands), json.dumps(HEAVY_MODULES)],
                            capture_output=True, text=True, timeout=300, check=False)
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(found) == len(commands) + 1 and len(commands) > 40, result.stderr
    assert {command: heavy for command, heavy in found.items() if heavy} == {}
