"""Headless Chromium driven over the DevTools protocol, for tests that open a written page in a real browser: open it
at a given viewport width, evaluate JavaScript in it, take a PNG screenshot, read its console errors.

The browser speaks the protocol over its pipe transport (NUL-separated JSON on file descriptors 3 and 4), so no
port and no websocket client are needed, and it is started with every flag that keeps it from making a connection
of its own (the test machine's closed network refuses them). ``browser()`` is a context manager that starts one
(or skips the test when there is no Chromium) and always closes it.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path(os.environ.get("CLADEBENCH_CHROMIUM", "/usr/bin/chromium"))
"""The browser: Debian's chromium, or the executable ``CLADEBENCH_CHROMIUM`` names."""
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--remote-debugging-pipe")
"""Headless Chromium that makes no connection of its own and speaks the DevTools protocol on fds 3 and 4."""
DEFAULT_WIDTH = 1400
"""Viewport width (CSS pixels) pages are opened at unless told otherwise: a laptop screen."""
DEFAULT_HEIGHT = 900
"""Viewport height (CSS pixels)."""


def _above_nine(fd: int) -> int:
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return moved


class DevTools:
    """Headless Chromium driven over the DevTools protocol's pipe transport (NUL-separated JSON on fds 3 and 4)."""

    def __init__(self, executable: Path, profile_dir: Path) -> None:
        child_in, self._write = os.pipe()
        self._read, child_out = os.pipe()
        # The browser expects its ends of the pipes on fds 3 and 4. They are first moved above 9, so that neither is
        # itself 3 or 4 and overwritten by the other's move, then put in place by a small Python launcher (a shell
        # would do, but dash takes one-digit fds only, and a preexec_fn is unsafe in a process with threads).
        child_in, child_out = (_above_nine(fd) for fd in (child_in, child_out))
        launcher = "import os, sys; os.dup2(int(sys.argv[1]), 3); os.dup2(int(sys.argv[2]), 4); " \
                   "os.execv(sys.argv[3], sys.argv[3:])"
        self.process = subprocess.Popen(
            [sys.executable, "-c", launcher, str(child_in), str(child_out), str(executable), *CHROMIUM_FLAGS,
             f"--user-data-dir={profile_dir}", "about:blank"],
            pass_fds=(child_in, child_out), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(child_in)
        os.close(child_out)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    def _message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._read], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._read, 1 << 16)
            if not chunk:
                raise EOFError("Chromium closed the DevTools pipe")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None,
             timeout: float = 30.0) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, session: str, timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            for event in self.events:
                if event.get("method") == method and event.get("sessionId") == session:
                    return event
            self.events.append(self._message(deadline))

    def evaluate(self, expression: str, session: str) -> Any:
        """The value of a JavaScript expression in the tab (returned by value: JSON-like data only)."""
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str, *, width: int = DEFAULT_WIDTH, height: int = DEFAULT_HEIGHT) -> str:
        """A new tab showing ``url`` in a ``width`` x ``height`` viewport, loaded; returns its session id."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            self.call(f"{domain}.enable", session=session)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session)
        self.call("Page.navigate", {"url": url}, session)
        self.wait_for("Page.loadEventFired", session)
        return session

    def screenshot(self, session: str, path: Path, *, full_page: bool = True) -> Path:
        """A PNG of the tab (the whole page, or only the viewport) written to ``path``."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]",
                                 session)
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1})
        data = self.call("Page.captureScreenshot", params, session, timeout=120)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def problems(self, session: str) -> list[Any]:
        """Console errors, uncaught exceptions and error log entries of a tab."""
        out = []
        for event in self.events:
            if event.get("sessionId") != session:
                continue
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown" or (
                    method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert")) or (
                    method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error"):
                out.append(params)
        return out

    def close(self) -> None:
        with contextlib.suppress(OSError, EOFError, TimeoutError, RuntimeError):
            self.call("Browser.close", timeout=10)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._read)
        os.close(self._write)


def chromium_available() -> bool:
    return CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)


@contextlib.contextmanager
def browser() -> Iterator[DevTools]:
    """A started headless Chromium with a throwaway profile, closed on exit; skips the test when there is none."""
    if not chromium_available():
        pytest.skip(f"no Chromium at {CHROMIUM} (install Debian's chromium or set CLADEBENCH_CHROMIUM)")
    profile = Path(tempfile.mkdtemp(prefix="cladebench-chromium-"))
    devtools = DevTools(CHROMIUM, profile)
    try:
        yield devtools
    finally:
        devtools.close()
        shutil.rmtree(profile, ignore_errors=True)
