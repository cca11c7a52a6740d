"""Who may use the app, checked on every request before any handler runs.

- Bound to this machine (127.0.0.1, ::1, localhost) without a token file, the app answers only requests whose
  ``Host`` names this machine: a web page elsewhere cannot reach it through a DNS name that points here.
- Bound to any other address, every request must carry a token: the ``X-Cladebench-Token`` header, or the cookie
  a first visit with ``?token=...`` sets (the visit is then redirected to the same page without the token, so
  the token does not stay in the address bar or the history). Without ``--token-file`` one token is made and
  printed once, in the URL the server prints.
- The person behind a request is the owner of its token (``request.state.user``), or the local user when there
  are no tokens: never a name typed into a form.
- A write (any method but GET, HEAD and OPTIONS) also needs the ``X-Cladebench-CSRF`` header with the value the
  pages carry, which a page of another site cannot read or send.

Every response says no to framing and sniffing and allows scripts, styles and images from this server only.
"""

from __future__ import annotations

import getpass
import hmac
import ipaddress
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, quote, urlencode

from cladebench.errors import CladebenchError, UsageError

if TYPE_CHECKING:
    from starlette.responses import Response
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

LOCAL_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
"""The addresses the help of the verb promises need no token when bound to (any other bind address asks for one)."""
TOKEN_HEADER = "x-cladebench-token"
CSRF_HEADER = "x-cladebench-csrf"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", b"default-src 'self'; img-src 'self' data:; script-src 'self'; "
                                 b"style-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
)


def is_local(host: str) -> bool:
    """Whether the ``Host`` of a request names this machine only: ``localhost`` or a loopback address
    (``127.0.0.0/8``, ``::1``). Whether a bind address needs a token is :func:`needs_token`'s question.

    A name that merely starts like one (``127.0.0.1.attacker.example``) is a DNS name anyone can point anywhere:
    not local."""
    name = host.strip("[]").lower()
    if name in LOCAL_HOSTS:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def needs_token(bind_host: str) -> bool:
    """Whether a server bound to ``bind_host`` must ask every request for a token: for any address but those of
    :data:`LOCAL_HOSTS` (as ``--help`` says). Another loopback address (``127.0.0.2``) is local too, but a name or
    an address someone chose on purpose is treated as the exception ``--help`` names, not guessed at."""
    name = bind_host.strip().strip("[]").lower()
    if name in LOCAL_HOSTS:
        return False
    try:
        return str(ipaddress.ip_address(name)) not in LOCAL_HOSTS
    except ValueError:
        return True


def same_site_path(path: str) -> str:
    """``path`` as a ``Location`` that stays on this server: percent-quoted, with one leading ``/``.

    A browser reads ``//host/...`` (and ``/\\host``, and either with a tab or line break inside, which browsers
    drop) as another site; the path of ``GET //evil.example/`` must not become such a redirect."""
    return "/" + quote(path, safe="/:@!$&'()*+,;=~").lstrip("/")


def new_token() -> str:
    """A fresh random token (32 bytes of the OS's randomness, URL-safe)."""
    return secrets.token_urlsafe(32)


@dataclass(frozen=True)
class Access:
    """Who may use a server: tokens and their owners, or none (a server bound to this machine)."""

    owners: Mapping[str, str] = field(default_factory=dict)
    """Token -> the name of the person it belongs to; empty: no token is asked for."""
    local_user: str = "local"
    """The person behind every request when no token is asked for."""
    cookie: str = "cladebench_token"
    """The cookie that carries the token (named per port: two servers on one host keep theirs apart)."""

    @property
    def required(self) -> bool:
        return bool(self.owners)

    def owner(self, token: str | None) -> str | None:
        """The owner of ``token``, compared in constant time; None for no or a wrong token."""
        if not token:
            return None
        found = None
        for known, name in self.owners.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                found = name
        return found


def read_token_file(path: Path) -> dict[str, str]:
    """Token -> owner from a file of ``OWNER TOKEN`` lines (``#`` starts a comment); one line per person."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CladebenchError(f"--token-file {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CladebenchError(f"--token-file {path}: cannot read it ({exc})") from None
    owners: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) != 2:
            raise UsageError(f"--token-file {path}, line {number}: expected 'OWNER TOKEN', got {len(words)} words")
        owner, token = words
        if len(token) < 16:
            raise UsageError(f"--token-file {path}, line {number}: a token must be at least 16 characters")
        if token in owners:
            raise UsageError(f"--token-file {path}, line {number}: this token is already {owners[token]!r}'s")
        owners[token] = owner
    if not owners:
        raise UsageError(f"--token-file {path}: no 'OWNER TOKEN' line in it")
    return owners


def local_user() -> str:
    """The name of the person running the server, for requests that carry no token."""
    try:
        return getpass.getuser()
    except Exception:  # no user name in the environment (a container): still one person
        return "local"


def _host_name(headers: Mapping[str, str]) -> str:
    host = headers.get("host", "")
    if host.startswith("["):
        return host[1:host.find("]")].lower()
    return host.rsplit(":", 1)[0].lower() if host.count(":") == 1 else host.lower()


class Guard:
    """ASGI middleware: the checks of the module docstring, then the app; security headers on every answer."""

    def __init__(self, app: ASGIApp, access: Access, csrf: str) -> None:
        self.app = app
        self.access = access
        self.csrf = csrf

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        refused = self._refusal(scope, headers)
        if refused is not None:
            await refused(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> Response | None:
        """An ASGI response refusing the request, or None when it may go on (``scope['state']['user']`` set)."""
        from starlette.responses import PlainTextResponse, RedirectResponse

        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        user: str | None
        if not self.access.required:
            if not is_local(_host_name(headers)):
                return PlainTextResponse("refused: this server answers requests addressed to this machine only\n",
                                         status_code=403)
            user = self.access.local_user
        else:
            cookies = SimpleCookie()
            try:
                cookies.load(headers.get("cookie", ""))
            except Exception:
                cookies = SimpleCookie()
            cookie = cookies.get(self.access.cookie)
            user = self.access.owner(headers.get(TOKEN_HEADER)) or self.access.owner(cookie.value if cookie else None)
            if user is None and scope["method"] == "GET" and "token" in query:
                owner = self.access.owner(query["token"])
                if owner is not None:  # a first visit: keep the token in a cookie, drop it from the address
                    rest = urlencode([(k, v) for k, v in parse_qsl(scope.get("query_string", b"").decode("latin-1"))
                                      if k != "token"])
                    response = RedirectResponse(same_site_path(scope["path"]) + (f"?{rest}" if rest else ""),
                                                status_code=303)
                    response.set_cookie(self.access.cookie, query["token"], httponly=True, samesite="strict")
                    return response
            if user is None:
                return PlainTextResponse("refused: this server needs a token (open the URL it printed, or send the "
                                         "X-Cladebench-Token header)\n", status_code=401)
        if scope["method"] not in SAFE_METHODS and not hmac.compare_digest(
                headers.get(CSRF_HEADER, "").encode(), self.csrf.encode()):
            return PlainTextResponse("refused: a write needs the X-Cladebench-CSRF header of this server's pages\n",
                                     status_code=403)
        scope.setdefault("state", {})["user"] = user
        return None
