"""Third-party log lines and warnings stay off the terminal unless ``--verbose``; a side effect is one line.

The command-line tests run ``python -m cladebench`` in a subprocess: Lance reads ``LANCE_LOG`` once, when it is
first imported, so only a fresh process shows what a user sees. The tests of :func:`third_party_output` itself
run in-process and check that it leaves logging, warnings and the environment as it found them.
"""

from __future__ import annotations

import io
import logging
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from cladebench import store
from cladebench.quiet import third_party_output

# --- the block itself ----------------------------------------------------------------------------------------


@pytest.fixture
def library_with_its_own_handler():
    """A logger that prints through a handler of its own, as huggingface_hub's does, and what it printed."""
    logger = logging.getLogger("cladebench_test_library")
    printed = io.StringIO()
    handler = logging.StreamHandler(printed)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield logger, printed
    logger.removeHandler(handler)
    logger.setLevel(logging.NOTSET)


def test_quiet_drops_library_logs_and_warnings_and_restores_everything(library_with_its_own_handler, capfd,
                                                                        monkeypatch):
    library, printed = library_with_its_own_handler
    monkeypatch.delenv("LANCE_LOG", raising=False)
    monkeypatch.delenv("PYTHONWARNINGS", raising=False)
    disabled_before = logging.root.manager.disable
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with third_party_output(verbose=False):
            assert os.environ["LANCE_LOG"] == "error"  # what Lance's Rust side reads at import
            assert os.environ["PYTHONWARNINGS"] == "ignore"  # for the Python processes the command starts
            logging.getLogger("pylance").warning("Final create_index rust time: 0.02s")
            library.warning("Retrying in 1s [Retry 1/5].")
            warnings.warn("lance is not fork-safe. If you are using multiprocessing, use spawn", stacklevel=1)
        assert caught == []
        warnings.warn("after the block", stacklevel=1)
        assert [str(w.message) for w in caught] == ["after the block"]
    assert capfd.readouterr().err == ""
    assert printed.getvalue() == ""
    assert "LANCE_LOG" not in os.environ and "PYTHONWARNINGS" not in os.environ
    assert logging.root.manager.disable == disabled_before
    library.warning("after the block")
    assert printed.getvalue() == "after the block\n"


def test_quiet_never_overrides_what_the_user_set(monkeypatch):
    monkeypatch.setenv("LANCE_LOG", "debug")
    monkeypatch.setenv("PYTHONWARNINGS", "default")
    with third_party_output(verbose=False):
        assert os.environ["LANCE_LOG"] == "debug" and os.environ["PYTHONWARNINGS"] == "default"
    assert os.environ["LANCE_LOG"] == "debug" and os.environ["PYTHONWARNINGS"] == "default"


def test_verbose_shows_library_info_once_with_its_name(library_with_its_own_handler, capfd, monkeypatch):
    library, printed = library_with_its_own_handler
    monkeypatch.delenv("LANCE_LOG", raising=False)
    root_handlers = list(logging.getLogger().handlers)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with third_party_output(verbose=True):
            assert "LANCE_LOG" not in os.environ  # Lance's own default
            pylance = logging.getLogger("pylance")
            pylance.setLevel(logging.INFO)
            pylance.info("Final create_index rust time: 0.02s")
            library.warning("Retrying in 1s [Retry 1/5].")
            warnings.warn("lance is not fork-safe", stacklevel=1)
            pylance.setLevel(logging.NOTSET)
    err = capfd.readouterr().err
    assert "INFO pylance: Final create_index rust time: 0.02s" in err
    assert printed.getvalue() == "Retrying in 1s [Retry 1/5].\n"
    assert "Retrying" not in err  # its own handler printed it; ours does not repeat it
    assert [str(w.message) for w in caught] == ["lance is not fork-safe"]
    assert logging.getLogger().handlers == root_handlers


# --- the command ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A small dataset embedded with a tiny CLIP (no vector index yet), and the model's name."""
    pytest.importorskip("torch")
    pytest.importorskip("open_clip")
    from cladebench.models.tiny import write_tiny_model
    from cladebench.synthetic import WorldConfig, make_world
    from helpers.embedded import write_embedded

    root = tmp_path_factory.mktemp("quiet")
    model = "local-dir:" + str(write_tiny_model(root / "tiny", seed=3))
    world = make_world(WorldConfig(seed=2, names="generated", branching=(1, 1, 2, 1, 2, 2, 2)))
    path = root / "gallery.lance"
    write_embedded(world.to_table(40, seed=2, image_format="jpeg"), path, model)
    return path, model


def _cladebench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k not in ("LANCE_LOG", "LANCE_INCLUDE_VECTOR_CENTROIDS")}
    environment.update(env or {})
    return subprocess.run([sys.executable, "-m", "cladebench", *args], env=environment, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow
def test_search_says_it_built_an_index_in_one_line_and_nothing_else(embedded, tmp_path):
    source, model = embedded
    path = tmp_path / "gallery.lance"
    shutil.copytree(source, path)
    before = store.open_dataset(path).version
    search = ["search", str(path), "a bird", "--model", model, "-k", "3", "--device", "cpu"]

    first = _cladebench(*search)
    assert first.returncode == 0, first.stderr
    after = store.open_dataset(path).version
    assert after > before
    assert first.stderr.splitlines() == [
        f"built an IVF_FLAT index on emb_tiny: new version {after} of the dataset (later searches reuse it)"]
    assert len(first.stdout.splitlines()) == 3

    again = _cladebench(*search)  # the index is there: Lance's statistics are read, and nothing is written
    assert again.returncode == 0, again.stderr
    assert again.stderr == ""
    assert store.open_dataset(path).version == after


@pytest.mark.parametrize(("argv", "verbose"), [
    (["info", "DS"], False),
    (["--verbose", "info", "DS"], True),
    (["info", "DS", "--verbose"], True),
    (["eval", "zeroshot", "DS", "--model", "M", "--out", "O", "--verbose"], True),
    (["eval", "--verbose", "zeroshot", "DS", "--model", "M", "--out", "O"], True),
    (["--verbose", "eval", "zeroshot", "DS", "--model", "M", "--out", "O"], True),
])
def test_verbose_is_taken_before_or_after_the_verb(argv, verbose):
    from cladebench.cli import build_parser

    args, extra = build_parser().parse_known_args(argv)
    assert args.verbose is verbose and extra == []


def test_verbose_shows_what_the_libraries_log(embedded, tmp_path):
    source, model = embedded
    path = tmp_path / "gallery.lance"
    shutil.copytree(source, path)
    done = _cladebench("search", str(path), "a bird", "--model", model, "-k", "1", "--device", "cpu", "--verbose")
    assert done.returncode == 0, done.stderr
    assert "INFO pylance: Final create_index" in done.stderr  # pylance's timing line, named
    assert "built an IVF_FLAT index on emb_tiny" in done.stderr


def test_a_lance_log_the_user_set_is_obeyed(embedded):
    path, _ = embedded
    quiet = _cladebench("info", str(path))
    assert quiet.returncode == 0 and quiet.stderr == ""
    chatty = _cladebench("info", str(path), env={"LANCE_LOG": "info"})
    assert chatty.returncode == 0
    assert "INFO  lance" in chatty.stderr  # Lance's Rust log, as the user asked
