"""Who may use the app: this machine only by default, a token on any other address (printed once, then a cookie),
owners from a token file, and no write without the pages' CSRF value."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from cladebench.errors import UsageError
from cladebench.serve.security import is_local, read_token_file
from helpers.serve_data import running


def test_a_local_server_answers_only_requests_addressed_to_this_machine(served) -> None:
    url, _ = served
    assert httpx.get(url, timeout=30).status_code == 200
    port = url.rsplit(":", 1)[1].strip("/")
    assert httpx.get(url, headers={"Host": f"localhost:{port}"}, timeout=30).status_code == 200
    rebound = httpx.get(url, headers={"Host": f"attacker.example:{port}"}, timeout=30)
    assert rebound.status_code == 403 and "this machine only" in rebound.text


def test_a_write_without_the_csrf_value_is_refused(served) -> None:
    url, _ = served
    refused = httpx.post(url, json={}, timeout=30)
    assert refused.status_code == 403 and "X-Cladebench-CSRF" in refused.text
    page = httpx.get(url, timeout=30).text
    csrf = page.split('<meta name="csrf" content="')[1].split('"')[0]
    assert len(csrf) >= 24
    passed = httpx.post(url, json={}, headers={"X-Cladebench-CSRF": csrf}, timeout=30)
    assert passed.status_code == 405  # past the guard: no write at / (the method is not allowed there)


def test_a_non_local_bind_needs_the_token_it_printed(serve_data) -> None:
    with running(serve_data, host="0.0.0.0") as (url, _started):
        assert "?token=" in url
        token = url.split("?token=")[1]
        base = url.split("?")[0]
        bare = httpx.get(base, timeout=30)
        assert bare.status_code == 401 and "needs a token" in bare.text
        assert httpx.get(base + "?token=wrong-token-0000000000", timeout=30).status_code == 401
        assert httpx.get(base + "thumb/x", timeout=30).status_code == 401  # every path, not only pages
        assert httpx.get(base, headers={"X-Cladebench-Token": token}, timeout=30).status_code == 200
        with httpx.Client(timeout=30) as client:  # a first visit with ?token= sets the cookie and drops it
            first = client.get(url, follow_redirects=False)
            assert first.status_code == 303 and first.headers["location"] == "/"
            assert "httponly" in first.headers["set-cookie"].lower()
            assert client.get(base + "runs").status_code == 200  # the cookie alone lets it in


def test_a_token_file_names_the_owner_of_each_request(serve_data, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("# reviewers\nada aaaaaaaaaaaaaaaaaaaaaaaa\ngrace bbbbbbbbbbbbbbbbbbbbbbbb  # second\n")
    with running(serve_data, token_file=tokens) as (url, _):
        assert "?token=" not in url  # nothing made, nothing printed
        assert httpx.get(url, timeout=30).status_code == 401  # a token file asks for tokens even when local
        page = httpx.get(url, headers={"X-Cladebench-Token": "bbbbbbbbbbbbbbbbbbbbbbbb"}, timeout=30)
        assert page.status_code == 200 and '<span class="user">grace</span>' in page.text


@pytest.mark.parametrize(("text", "message"), [
    ("ada\n", "expected 'OWNER TOKEN'"),
    ("ada short\n", "at least 16"),
    ("ada aaaaaaaaaaaaaaaaaaaa\nbob aaaaaaaaaaaaaaaaaaaa\n", "already 'ada'"),
    ("# nothing\n", "no 'OWNER TOKEN' line"),
])
def test_a_bad_token_file_is_a_usage_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "tokens"
    path.write_text(text)
    with pytest.raises(UsageError, match=message):
        read_token_file(path)


def test_which_addresses_are_local() -> None:
    assert is_local("127.0.0.1") and is_local("localhost") and is_local("::1") and is_local("[::1]")
    assert not is_local("0.0.0.0") and not is_local("192.168.1.5") and not is_local("::")


@pytest.mark.parametrize("path", ["//evil.example/", "/\\evil.example/", "/%2F%2Fevil.example/", "/%5Cevil.example/",
                                  "/%09/evil.example/", "///evil.example/x"])
def test_the_token_redirect_stays_on_this_server(serve_data, path: str) -> None:
    with running(serve_data, host="0.0.0.0") as (url, _started):
        token = url.split("?token=")[1]
        base = url.split("?")[0].rstrip("/")
        first = httpx.get(f"{base}{path}?token={token}&page=2", follow_redirects=False, timeout=30)
        assert first.status_code == 303
        location = first.headers["location"]
        target = httpx.URL(base + "/").join(location)
        assert (target.host, target.port) == (httpx.URL(base).host, httpx.URL(base).port), location
        assert location.startswith("/") and not location.startswith(("//", "/\\")) and "\t" not in location
        assert location.endswith("?page=2")


@pytest.mark.parametrize("host", ["127.0.0.2", "127.1.2.3"])
def test_a_loopback_address_other_than_the_default_needs_a_token(serve_data, host: str) -> None:
    with running(serve_data, host=host) as (url, _started):
        assert url.startswith(f"http://{host}:") and "?token=" in url
        base = url.split("?")[0]
        assert httpx.get(base, timeout=30).status_code == 401
        assert httpx.get(url, follow_redirects=True, timeout=30).status_code == 200


def test_the_addresses_help_names_need_no_token(serve_data) -> None:
    from cladebench.serve.security import needs_token

    for host in ("127.0.0.1", "::1", "[::1]", "0:0:0:0:0:0:0:1", "localhost", "LOCALHOST"):
        assert not needs_token(host), host
    for host in ("127.0.0.2", "127.1", "0.0.0.0", "::", "192.168.1.5", "localhost.example", "0:0:0:0:0:0:0:2"):
        assert needs_token(host), host
    with running(serve_data, host="localhost") as (url, _started):
        assert "?token=" not in url and httpx.get(url, timeout=30).status_code == 200
