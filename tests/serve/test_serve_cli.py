"""``cladebench serve`` as a user runs it: the URL printed, Ctrl-C ends it with exit 0, mistakes are one line, and
the rest of the command does not need FastAPI."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from cladebench.cli import main

CLI = [sys.executable, "-m", "cladebench"]


def test_serve_prints_its_url_answers_and_stops_on_ctrl_c_with_exit_0(serve_data, tmp_path: Path) -> None:
    env = {**os.environ, "CLADEBENCH_CACHE_DIR": str(tmp_path / "cache")}
    process = subprocess.Popen([*CLI, "serve", str(serve_data.dataset), *map(str, serve_data.runs), "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = process.stdout.readline()  # blocks until the server prints it
        assert line.startswith(f"serving {serve_data.dataset} (48 rows, 2 runs) at http://127.0.0.1:"), line
        url = line.rsplit(" at ", 1)[1].strip()
        assert httpx.get(url, timeout=60).status_code == 200
        process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err
    assert "stopped" in err and "Traceback" not in err


def test_a_port_in_use_is_one_line_and_exit_1(serve_data, capsys) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        code = main(["serve", str(serve_data.dataset), "--port", str(taken.getsockname()[1])])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("cladebench serve: error: cannot listen on 127.0.0.1:") and err.count("\n") == 1


def test_a_missing_dataset_or_run_is_one_line(serve_data, tmp_path: Path, capsys) -> None:
    assert main(["serve", str(tmp_path / "none.lance")]) == 3
    assert main(["serve", str(serve_data.dataset), str(tmp_path / "no-run.json"), "--port", "0"]) != 70
    assert main(["serve", str(serve_data.dataset), "--port", "70000"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 3 and "internal error" not in err


def test_runs_may_follow_the_options(serve_data) -> None:
    from cladebench.cli import build_parser
    from cladebench.config import config_from_args, take_late_positionals
    from cladebench.serve.config import ServeConfig

    args, extra = build_parser().parse_known_args(["serve", "DS", "--port", "9", "a/run.json", "b/run.json"])
    assert take_late_positionals(ServeConfig, args, extra) == []
    config = config_from_args(ServeConfig, args)
    assert config.runs == (Path("a/run.json"), Path("b/run.json")) and config.port == 9


def test_the_command_line_does_not_import_fastapi() -> None:
    code = ("import sys; from cladebench.cli import build_parser; build_parser(); "
            "print(any(m.split('.')[0] in ('fastapi', 'uvicorn', 'starlette') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_help_says_where_reviews_are_written(capsys) -> None:
    """serve writes reviews inside the dataset folder: the help says where, and never that the dataset is
    read-only."""
    with pytest.raises(SystemExit) as stopped:
        main(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert stopped.value.code == 0
    assert "DATASET/_cladebench/reviews.lance" in text and "read-only" not in text
