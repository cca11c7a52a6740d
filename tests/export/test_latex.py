"""``cladebench results DIR --format latex`` on a small real suite: the table's numbers are ``results --format json``'s,
its bold and tie marks are the Markdown pivot's, hostile model and benchmark names come out escaped (and read back
as themselves), skipped and unverified runs are said under the table, and the table compiles where pdflatex is."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from cladebench.cli import main
from cladebench.escaping import latex_escape
from cladebench.evaluate.suite.results import SCHEMA, update_results
from cladebench.export.latex import SYMBOLS
from cladebench.metrics import display_scale
from helpers.export_suite import HOSTILE_BENCHMARK, HOSTILE_MODEL, rename_benchmark

COMMANDS = {r"\textbackslash{}": "\\", r"\textasciitilde{}": "~", r"\textasciicircum{}": "^", r"\textless{}": "<",
            r"\textgreater{}": ">", r"\textbar{}": "|", **{f"\\{c}": c for c in "{}_%&#$"}}


def unescape(text: str) -> str:
    """A LaTeX cell's text as it prints; fails on any special character left bare (a command the data made)."""
    out, i = "", 0
    while i < len(text):
        command = next((c for c in COMMANDS if text.startswith(c, i)), None)
        if command is not None:
            out, i = out + COMMANDS[command], i + len(command)
            continue
        assert text[i] not in "\\{}_%&#$~^", f"bare {text[i]!r} at {i} in {text!r}"
        out, i = out + text[i], i + 1
    return out


def _results(capsys, folder, *args) -> str:
    assert main(["results", str(folder), *args]) == 0
    return capsys.readouterr().out


def _body(latex: str) -> list[list[str]]:
    if "\\endlastfoot" in latex:  # a longtable: its rows after its header and feet
        body = latex.split("\\endlastfoot\n", 1)[1].split("\n\\end{longtable}", 1)[0]
        return [line.removesuffix(r" \\").split(" & ") for line in body.splitlines()]
    body = latex.split("\\midrule\n", 1)[1].split("\n\\bottomrule", 1)[0]
    return [line.removesuffix(r" \\").split(" & ") for line in body.splitlines()]


def test_latex_numbers_are_the_json_ones_and_marks_the_markdown_ones(export_suite, capsys):
    out, models = export_suite["out"], export_suite["models"]
    rows = json.loads(_results(capsys, out, "--format", "json"))
    latex = _results(capsys, out, "--format", "latex")
    markdown = _results(capsys, out)
    assert r"\toprule" in latex and r"\label{tab:cladebench-results}" in latex and "\\caption{" in latex
    assert "ap@100" in latex.split("\\caption{")[1].split("\n")[0]  # the caption names the metric ...
    assert "95\\% percentile bootstrap" in latex  # ... and the interval method, from the records
    body = {unescape(cells[0]): cells[1] for cells in _body(latex)}
    assert set(body) == {m.replace("\n", " ") for m in models}
    scale, unit = display_scale("ap@100")
    for model in models:
        row = next(r for r in rows if r["model"] == model and r["metric"] == "ap@100")
        cell = body[model.replace("\n", " ")]
        expected = f"{scale * row['value']:.2f}{unit} [{scale * row['low']:.2f}, {scale * row['high']:.2f}]"
        line = next(line for line in markdown.splitlines() if line.startswith("| local-dir")
                    and ("tiny-b" in line) == ("tiny-b" in model))
        if "(best" in line:
            assert cell == rf"\textbf{{{latex_escape(expected)}}}"
        else:
            mark = re.search(r"\((tied|worse|differs|not tested|not compared)", line).group(1)
            assert cell == latex_escape(expected) + SYMBOLS[mark]
    # bold exactly where the Markdown says best (a best only where a difference holds: here at most one)
    assert sum("(best" in line for line in markdown.splitlines()) == sum(r"\textbf" in c for c in body.values()) <= 1
    halfwidth = _results(capsys, out, "--format", "latex", "--interval", "halfwidth", "--label", "tab:x_1")
    assert r"\label{tab:x_1}" in halfwidth  # a key, not text: never escaped, and what TeX cannot read is refused
    assert main(["results", str(out), "--format", "latex", "--label", "tab:50%"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "a LaTeX label may hold" in err
    row = next(r for r in rows if r["model"] == models[1] and r["metric"] == "ap@100")
    assert rf"{scale * row['value']:.2f}{unit} $\pm$ {scale * (row['high'] - row['low']) / 2:.2f}" in halfwidth


def test_hostile_names_are_escaped_and_left_out_runs_said(export_suite, capsys, tmp_path):
    folder = rename_benchmark(export_suite["out"], tmp_path / "copy")
    update_results(folder, ["skipped-key"], [{**dict.fromkeys(SCHEMA.names), "benchmark": "inquire-rerank",
                                              "protocol": "rerank", "model": "m_%&", "key": "skipped-key",
                                              "status": "skipped", "reason": "too few {queries} & 50%"}])
    pivot = _results(capsys, folder, "--format", "latex")
    notes = pivot.split("\\end{tabular}", 1)[1]
    # The renamed benchmark is no benchmark of this version: said in the notes, as the Markdown pivot says it.
    assert latex_escape(HOSTILE_BENCHMARK) + ": no such benchmark" in notes
    assert latex_escape("Skipped: inquire-rerank (rerank) with m_%&: too few {queries} & 50%") in notes
    rows = _results(capsys, folder, "--format", "latex", "--view", "rows")
    lines = _body(rows)
    assert {unescape(cells[0]) for cells in lines} == {HOSTILE_BENCHMARK.replace("\n", " ")}
    assert {unescape(cells[2]) for cells in lines} == {m.replace("\n", " ") for m in export_suite["models"]}
    for cells in lines:
        assert len(cells) == 6 and all(unescape(c) is not None for c in cells[:4])
    assert "Skipped: inquire-rerank (rerank) with m\\_\\%\\&" in rows
    assert "\r" not in rows and HOSTILE_MODEL not in rows


def test_an_unverified_cell_is_a_lettered_note_never_a_number(export_suite, capsys, tmp_path):
    folder = tmp_path / "copy"
    shutil.copytree(export_suite["out"], folder)
    update_results(folder, ["ghost"], [{**dict.fromkeys(SCHEMA.names), "benchmark": "inquire-rerank",
                                        "protocol": "rerank", "model": "ghost_1", "metric": "ap@100", "value": 99.0,
                                        "low": 98.0, "high": 100.0, "n": 2, "run": "runs/none/run.json",
                                        "key": "ghost", "status": "finished", "recorded_at": "9999"}])
    latex = _results(capsys, folder, "--format", "latex")
    # A model whose only run does not check has no row (as in the Markdown pivot), and is said under the table.
    assert "ghost" not in latex.split("\\end{tabular}")[0] and "99.00" not in latex
    assert r"Not shown: inquire-rerank (rerank) with ghost\_1: its run record is missing" in latex
    # A model's newest run that does not check is its cell, as refused: a lettered note says why.
    update_results(folder, ["ghost-b"], [{**dict.fromkeys(SCHEMA.names), "benchmark": "inquire-rerank",
                                          "protocol": "rerank", "model": export_suite["models"][1],
                                          "metric": "ap@100", "value": 99.0, "low": 98.0, "high": 100.0, "n": 2,
                                          "run": "runs/none-b/run.json", "key": "ghost-b", "status": "finished",
                                          "recorded_at": "9999"}])
    latex = _results(capsys, folder, "--format", "latex")
    cells = {unescape(cells[0]): cells[1] for cells in _body(latex)}
    assert cells[export_suite["models"][1]] == r"unverified\textsuperscript{a}" and "99.00" not in latex
    assert "\\textsuperscript{a}~" + latex_escape(f"{export_suite['models'][1]}: its run record is missing") in latex


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed here: the tables are checked "
                    "as text only (their escaping by unescape()); where TeX is, this compiles them")
def test_the_tables_compile_with_pdflatex(export_suite, capsys, tmp_path):
    folder = rename_benchmark(export_suite["out"], tmp_path / "copy")
    tables = [_results(capsys, export_suite["out"], "--format", "latex", "--label", "tab:pivot_1"),
              _results(capsys, folder, "--format", "latex", "--view", "rows", "--interval", "halfwidth")]
    document = tmp_path / "tables.tex"
    document.write_text("\\documentclass{article}\n\\usepackage{booktabs,longtable}\n\\begin{document}\n"
                        + "\n".join(tables) + "\n\\end{document}\n")
    done = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", document.name],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:]
    assert (tmp_path / "tables.pdf").stat().st_size > 0
