"""Who may use the dashboard: one-time codes, the sessions they open, the owner's credential, and the
guard every request passes, on a real aiohttp server (the dashboard mounted under /dashboard)."""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from trainyard.dashboard.login import CODE_TTL, COOKIE, SESSION_TTL, WRITE_HEADER, Logins

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


def logins(owner: str | None = "owner-token") -> tuple[Logins, Clock]:
    clock = Clock()
    counter = itertools.count(1)
    return Logins(owner, clock=clock, token=lambda: f"t{next(counter)}"), clock


def test_a_code_opens_one_session_once() -> None:
    login, _ = logins()
    code = login.mint()
    session = login.redeem(code)
    assert session is not None and session != code
    assert login.valid(session)
    assert login.redeem(code) is None, "a spent code opens nothing"
    assert login.redeem("never-minted") is None
    assert login.redeem("") is None


def test_a_code_expires_after_its_ttl() -> None:
    login, clock = logins()
    early, late = login.mint(), login.mint()
    clock.now = NOW + CODE_TTL - timedelta(seconds=1)
    assert login.redeem(early) is not None, "a code works until its TTL is up"
    clock.now = NOW + CODE_TTL
    assert login.redeem(late) is None, "at CODE_TTL the code has expired"


def test_expired_codes_are_forgotten_when_new_ones_are_minted() -> None:
    login, clock = logins()
    old = login.mint()
    clock.now = NOW + CODE_TTL + timedelta(seconds=1)
    login.mint()
    clock.now = NOW  # even a clock that went back does not revive a code that was dropped
    assert login.redeem(old) is None


def test_a_session_lasts_its_ttl() -> None:
    login, clock = logins()
    session = login.redeem(login.mint())
    clock.now = NOW + SESSION_TTL - timedelta(seconds=1)
    assert login.valid(session)
    clock.now = NOW + SESSION_TTL
    assert not login.valid(session)
    assert not login.valid(None) and not login.valid("") and not login.valid("t999")


def test_only_the_owners_bearer_token_is_the_owner() -> None:
    login, _ = logins("owner-token")
    for header in ("Bearer owner-token", "bearer owner-token", "BEARER owner-token", "  Bearer   owner-token  "):
        assert login.is_owner(header), header
    refused: tuple[str | None, ...] = (
        None,
        "",
        "owner-token",
        "Bearer",
        "Bearer owner-token2",
        "Bearer owner-toke",
        "Basic owner-token",
    )
    for given in refused:
        assert not login.is_owner(given), given


def test_a_plane_without_an_owner_token_lets_anyone_mint() -> None:
    # Its plain-HTTP opt-in: the API itself is open to whoever reaches it, so the minting is too.
    login, _ = logins(None)
    assert login.is_owner(None) and login.is_owner("Bearer anything") and login.is_owner("")


def test_the_session_cookie_is_httponly_strict_and_secure_under_dashboard() -> None:
    login, _ = logins()
    response = web.Response()
    login.cookie(response, "s1")
    morsel = response.cookies[COOKIE]
    assert morsel.value == "s1"
    assert morsel["path"] == "/dashboard" and morsel["httponly"] and morsel["secure"]
    assert morsel["samesite"] == "Strict"
    assert int(morsel["max-age"]) == int(SESSION_TTL.total_seconds())
    plain, _ = logins()
    plain.secure = False
    response = web.Response()
    plain.cookie(response, "s2")
    assert not response.cookies[COOKIE]["secure"], "a plain-HTTP plane's cookie must reach it over HTTP"


# -- the guard, on a real server ---------------------------------------------------------------------


async def _echo(request: web.Request) -> web.Response:
    return web.json_response({"path": request.path, "method": request.method})


def _app(login: Logins) -> web.Application:
    dashboard = web.Application(middlewares=[login.middleware()])
    for path in ("", "/", "/login", "/assets/{name}", "/api/jobs", "/api/history"):
        dashboard.router.add_get(path, _echo)
    dashboard.router.add_post("/api/login-codes", _echo)
    dashboard.router.add_post("/api/jobs/{ns}/{plural}/{name}/suspend", _echo)
    dashboard.router.add_delete("/api/jobs/{ns}/{plural}/{name}", _echo)
    root = web.Application()
    root.add_subapp("/dashboard", dashboard)
    return root


def _call(login: Logins, requests: list[tuple[str, str, dict[str, str]]]) -> list[tuple[int, Any]]:
    async def go() -> list[tuple[int, Any]]:
        answers = []
        async with TestServer(_app(login)) as server, aiohttp.ClientSession() as client:
            for method, path, headers in requests:
                async with client.request(method, server.make_url(path), headers=headers) as answer:
                    body = await answer.json() if answer.content_type == "application/json" else None
                    answers.append((answer.status, body))
        return answers

    return asyncio.run(go())


def test_the_api_needs_a_session_and_says_how_to_get_one() -> None:
    login, _ = logins()
    [(code, body), (stale, _)] = _call(
        login, [("GET", "/dashboard/api/jobs", {}), ("GET", "/dashboard/api/jobs", {"Cookie": f"{COOKIE}=t999"})]
    )
    assert code == 401 and stale == 401
    assert body["kind"] == "Status" and body["status"] == "Failure" and body["code"] == 401
    assert body["reason"] == "Unauthorized" and "yard dashboard" in body["message"]


def test_a_session_reads_and_writes_need_the_dashboard_header() -> None:
    login, _ = logins()
    session = login.redeem(login.mint())
    cookie = {"Cookie": f"{COOKIE}={session}"}
    answers = _call(
        login,
        [
            ("GET", "/dashboard/api/history", cookie),
            ("POST", "/dashboard/api/jobs/default/pytorchjobs/a/suspend", cookie),
            ("DELETE", "/dashboard/api/jobs/default/pytorchjobs/a", cookie),
            ("POST", "/dashboard/api/jobs/default/pytorchjobs/a/suspend", {**cookie, WRITE_HEADER: "yes"}),
            ("POST", "/dashboard/api/jobs/default/pytorchjobs/a/suspend", {**cookie, WRITE_HEADER: "1"}),
            ("DELETE", "/dashboard/api/jobs/default/pytorchjobs/a", {**cookie, WRITE_HEADER: "1"}),
        ],
    )
    assert [code for code, _ in answers] == [200, 403, 403, 403, 200, 200]
    refused = answers[1][1]
    assert refused["reason"] == "Forbidden" and WRITE_HEADER in refused["message"]


def test_the_assets_the_login_and_code_minting_pass_without_a_session() -> None:
    login, _ = logins()
    answers = _call(
        login,
        [
            ("GET", "/dashboard/assets/index-abc.js", {}),
            ("GET", "/dashboard/login?token=x", {}),
            ("POST", "/dashboard/api/login-codes", {}),  # checks the owner's credential itself
            ("GET", "/dashboard/", {}),  # the index answers its own 401 page
        ],
    )
    assert [code for code, _ in answers] == [200, 200, 200, 200]
    assert [body["path"] for _, body in answers] == [
        "/dashboard/assets/index-abc.js",
        "/dashboard/login",
        "/dashboard/api/login-codes",
        "/dashboard/",
    ]
