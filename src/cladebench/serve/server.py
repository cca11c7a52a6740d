"""Starting and stopping the app: the config of ``cladebench serve``, the socket, the URL printed, Ctrl-C.

The socket is bound before uvicorn starts, so a port in use is one line (exit 1) and the URL printed is the one
that answers (``--port 0`` picks a free port). Ctrl-C (or SIGTERM) lets the requests in flight finish and ends
the command with exit 0: stopping is how a server is meant to end, not an interruption of work.
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cladebench.console import note
from cladebench.errors import CladebenchError
from cladebench.serve.config import ServeConfig
from cladebench.serve.security import Access, local_user, needs_token, new_token, read_token_file
from cladebench.serve.state import ServeState

if TYPE_CHECKING:
    from collections.abc import Sequence

    import lance
    import uvicorn

    from cladebench.report.runs import ReportRun


@dataclass(frozen=True)
class Started:
    """A server ready to run: the uvicorn server, its bound socket, the URL to open and who may use it."""

    server: uvicorn.Server
    """The ``uvicorn.Server``."""
    sock: socket.socket
    url: str
    """The address to open (with ``?token=`` when a token was made here)."""
    access: Access
    state: ServeState

    def run(self) -> None:
        """Serve until stopped (Ctrl-C in the main thread, or ``server.should_exit = True`` from another)."""
        self.server.run(sockets=[self.sock])

    def run_in_thread(self) -> threading.Thread:
        """Serve from a daemon thread (tests, benchmarks); stop with :meth:`stop`."""
        thread = threading.Thread(target=self.run, name="cladebench-serve", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self.server.should_exit = True


def open_state(config: ServeConfig) -> ServeState:
    """The dataset and runs of ``config``, opened once (a missing dataset or run is one line before any socket)."""
    from cladebench.report.runs import load_runs
    from cladebench.store import open_dataset

    dataset = open_dataset(config.dataset)
    runs = load_runs(config.runs) if config.runs else ()
    _check_runs_are_over(dataset, config.dataset, runs)
    return ServeState(uri=config.dataset, dataset=dataset, runs=tuple(runs), model=config.model,
                      device=config.device)


def _check_runs_are_over(dataset: lance.LanceDataset, uri: str, runs: Sequence[ReportRun]) -> None:
    """Refuse a run none of whose predicted rows is in the dataset (a run over another dataset: every cell of its
    grid would be a row the app cannot show). A run over part of the dataset is kept."""
    import pyarrow as pa
    import pyarrow.compute as pc

    checked = [run for run in runs if run.predictions is not None and "uuid" in run.predictions.column_names
               and run.predictions.num_rows]
    if not checked:
        return
    present = dataset.to_table(columns=["uuid"]).column("uuid")
    for run in checked:
        assert run.predictions is not None  # checked above
        predicted = run.predictions.column("uuid")
        if not pc.any(pc.is_in(predicted, value_set=pa.chunked_array(present).combine_chunks())).as_py():
            made_on = run.dataset.get("uri")
            raise CladebenchError(f"run {run.path}: none of its {predicted.length():,} predicted rows is in {uri}"
                                  + (f" (it was made on {made_on})" if made_on else ""))


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise CladebenchError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(128)
    sock.setblocking(False)
    return sock


def start(config: ServeConfig, state: ServeState | None = None) -> Started:
    """Everything up to serving: the state, who may use it, the app and the bound socket."""
    import uvicorn

    from cladebench.serve.app import create_app

    state = state or open_state(config)
    owners = read_token_file(config.token_file) if config.token_file else {}
    made = None
    if not owners and needs_token(config.host):
        made = new_token()
        owners = {made: local_user()}
    sock = _bind(config.host, config.port)
    port = sock.getsockname()[1]
    access = Access(owners=owners, local_user=local_user(), cookie=f"cladebench_token_{port}")
    app = create_app(state, access)
    shown_host = "127.0.0.1" if config.host in ("0.0.0.0", "::") else config.host
    shown_host = f"[{shown_host}]" if ":" in shown_host else shown_host
    url = f"http://{shown_host}:{port}/" + (f"?token={made}" if made else "")
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                                           timeout_graceful_shutdown=5))
    return Started(server=server, sock=sock, url=url, access=access, state=state)


def serve(config: ServeConfig) -> int:
    """``cladebench serve``: print the URL, serve until Ctrl-C, exit 0."""
    started = start(config)
    state = started.state
    runs = f", {len(state.runs)} run{'s' if len(state.runs) != 1 else ''}" if state.runs else ""
    print(f"serving {config.dataset} ({state.dataset.count_rows():,} rows{runs}) at {started.url}", flush=True)
    if started.access.required and config.token_file is None:
        print("every request needs the token in that URL (it is printed only this once); stop with Ctrl-C",
              flush=True)
    else:
        print("stop with Ctrl-C", flush=True)
    try:
        started.run()
    except KeyboardInterrupt:  # uvicorn re-raises the Ctrl-C it handled, once the requests in flight are done
        pass
    finally:
        started.sock.close()
    note("stopped")
    return 0
