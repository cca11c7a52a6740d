"""A report whose challenge group has a 300-character name (no separator to wrap at): the name wraps inside its
own cell (never overprinting the value beside it), and the page at 1,280 px never scrolls sideways."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

pytest.importorskip("jinja2", reason="reports need jinja2 (the report extra)")
pytest.importorskip("matplotlib", reason="reports need matplotlib (the report extra)")

from cladebench import store
from cladebench.cli import main
from cladebench.report.render import breakable_html
from helpers.devtools import browser, chromium_available

LONG = "Peromyscus" + "x" * 290

OVERFLOWING_CELLS = """Array.from(document.querySelectorAll('th, td'))
  .filter(e => e.scrollWidth > e.clientWidth + 1 || e.getBoundingClientRect().right > innerWidth + 0.5)
  .map(e => [e.tagName, e.className, e.closest('table').className])"""


def test_a_long_word_gets_a_break_opportunity_every_few_characters() -> None:
    assert str(breakable_html("a" * 50)) == "a" * 24 + "<wbr>" + "a" * 24 + "<wbr>" + "aa"
    assert str(breakable_html("Felis catus/top1_species")) == "Felis catus/<wbr>top1_<wbr>species"
    assert "&amp;" in str(breakable_html("&" * 30))  # entities are never cut


def test_a_300_character_group_name_keeps_the_page_within_the_window(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    if not chromium_available():
        pytest.skip("no Chromium to measure the page in")
    n = 24
    vectors = np.random.default_rng(0).normal(size=(n, 4)).astype(np.float32)
    table = pa.table({"uuid": [f"u{i:02d}" for i in range(n)],
                      "image": pa.array([bytes([i]) for i in range(n)], pa.large_binary()),
                      "genus": ["Genus"] * n, "species": [f"sp{i % 3}" for i in range(n)],
                      "challenge_group": [LONG if i % 2 else "short" for i in range(n)]})
    field = store.embedding_field("toy", 4, {"model": "toy-model"})
    store.write_dataset(table.append_column(field, pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 4)),
                        tmp_path / "d.lance")
    assert main(["eval", "fewshot", str(tmp_path / "d.lance"), "--column", "emb_toy", "--out", str(tmp_path / "run"),
                 "--shots", "1"]) == 0
    assert main(["report", str(tmp_path / "run"), "--out-file", str(tmp_path / "report.html")]) == 0
    with browser() as devtools:
        page = devtools.open((tmp_path / "report.html").as_uri(), width=1280)
        assert devtools.evaluate("document.documentElement.scrollWidth", page) <= 1280
        assert devtools.evaluate(OVERFLOWING_CELLS, page) == []
        assert devtools.evaluate(f"document.body.innerText.replace(/\\s/g, '').includes('{LONG}')", page)
