"""Configs generate the CLI: field docstrings become help, types become parsers."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

from cladebench.config import OPTION, add_config_arguments, bare_value, config_from_args, config_to_dict, field_docs


@dataclass(frozen=True)
class Example:
    """An example config."""

    dataset: str
    """Where the data is."""
    out: Path = field(metadata=OPTION)
    """Where results go."""
    k: int = 5
    """How many neighbours."""
    style: Literal["sci", "com"] = "sci"
    """Name style."""
    shuffle: bool = True
    """Shuffle first."""
    columns: tuple[str, ...] = ("uuid",)
    """Columns to read."""
    where: str | None = None
    """Optional filter."""


def parse(*argv: str) -> Example:
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, Example)
    return config_from_args(Example, parser.parse_args(list(argv)))


def test_field_docs_are_read_from_source() -> None:
    docs = field_docs(Example)
    assert docs["dataset"] == "Where the data is."
    assert docs["columns"] == "Columns to read."


def test_defaults_and_types() -> None:
    config = parse("data.lance", "--out", "o")
    assert config == Example(dataset="data.lance", out=Path("o"))
    config = parse("d", "--out", "o", "--k", "7", "--style", "com", "--no-shuffle", "--columns", "a", "b",
                   "--where", "x > 1")
    assert config.k == 7 and config.style == "com" and config.shuffle is False
    assert config.columns == ("a", "b") and config.where == "x > 1"
    hash(config)  # tuples keep frozen configs hashable


def test_bad_values_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse("d", "--out", "o", "--style", "latin")
    assert exc.value.code == 2
    assert "argument --style: unknown value 'latin'; known: com, sci." in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse("d")  # --out is required


def test_help_shows_docstrings_and_defaults() -> None:
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, Example)
    text = parser.format_help()
    assert "How many neighbours. (default: 5)" in text
    assert "--shuffle, --no-shuffle" in text


def test_config_to_dict_is_json_ready() -> None:
    assert config_to_dict(parse("d", "--out", "o"))["out"] == "o"


@dataclass(frozen=True)
class _Cluster:
    dataset: str
    """Where."""
    ray: str | None = field(default=None, metadata=bare_value("default"))
    """Cluster address; alone, the default cluster."""


@pytest.mark.parametrize(("argv", "expected"), [
    (["d"], None),
    (["d", "--ray"], "default"),
    (["d", "--ray", "ray://head:10001"], "ray://head:10001"),
    (["--ray", "auto", "d"], "auto"),
])
def test_an_option_may_be_given_bare(argv: list[str], expected: str | None) -> None:
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, _Cluster)
    assert config_from_args(_Cluster, parser.parse_args(argv)).ray == expected
