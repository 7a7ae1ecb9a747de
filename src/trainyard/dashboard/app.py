"""The dashboard as an aiohttp application: its routes, the pages' JSON, the built front end.

Mounted under ``/dashboard`` on the embedded plane's HTTPS address (``ApiPlane.mounts``), or
served alone by ``python -m trainyard.dashboard`` in a cluster's Deployment: either way it reads
the API with its own client (the plane's in-process one, or its ServiceAccount's), watches every
job kind (``watching``), records the history (``history``), streams changes (``live``) and
serves the front end that ``make install`` builds into ``static/`` (``web/``). The routes and
their JSON are documented in docs/dashboard.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web
from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError

from trainyard.api.family import FamilyKind
from trainyard.api.meta import Obj
from trainyard.dashboard import actions, catalog, pages, views
from trainyard.dashboard.history.recorder import Recorder
from trainyard.dashboard.history.store import HistoryStore
from trainyard.dashboard.live import Live
from trainyard.dashboard.login import COOKIE, PREFIX, Handler, Logins
from trainyard.dashboard.responses import body, not_found, status
from trainyard.dashboard.views import Json
from trainyard.dashboard.watching import Watched
from trainyard.kit.informer import Informer

log = logging.getLogger(__name__)

STATIC = Path(__file__).with_name("static")
"""Where ``make install`` builds the front end (``web/``: ``npm run build``)."""
RETRY = 5.0
"""Seconds between two attempts at the first lists when the server refused them."""
SYNC_WAIT = 30.0
"""Seconds a request waits for the first lists of the informers after a start."""
LOG_TAIL = 1000
"""Lines of a pod's log a page opens with, as ``kubectl logs --tail`` (then it follows)."""

_MISSING_UI = (
    "<!doctype html><title>trainyard dashboard</title><h1>The dashboard's pages are not built</h1>"
    "<p>Its front end is built by <code>make install</code> (npm, from <code>web/</code>).</p>"
)
_LOGIN_NEEDED = (
    "<!doctype html><title>trainyard dashboard</title><h1>Log in to the trainyard dashboard</h1>"
    "<p>Run <code>yard dashboard</code>: it prints (and opens) a one-time login link.</p>"
)


class Dashboard:
    """The application is made first (the embedded plane mounts it before it listens); ``attach``
    gives it its API client once there is one, and ``run`` then watches until cancelled."""

    def __init__(
        self,
        store: HistoryStore,
        logins: Logins,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        static: Path = STATIC,
    ) -> None:
        self.store = store
        self.logins = logins
        self.clock = clock
        self.static = static
        self.synced = asyncio.Event()
        self._parts: tuple[AsyncClient, Watched, Recorder, Live] | None = None
        self.failure: str | None = None
        """Why the informers could not list, while they cannot."""

    def attach(self, client: AsyncClient, *, pods: Informer | None = None) -> None:
        """``pods``: the process's own informer of every pod, to share (``Watched``)."""
        watched = Watched(client, pods=pods)
        recorder = Recorder(client, watched, self.store, clock=self.clock)
        live = Live(watched)
        recorder.on_point.append(live.point)
        self._parts = (client, watched, recorder, live)

    @property
    def client(self) -> AsyncClient:
        return self._attached()[0]

    @property
    def watched(self) -> Watched:
        return self._attached()[1]

    @property
    def live(self) -> Live:
        return self._attached()[3]

    def _attached(self) -> tuple[AsyncClient, Watched, Recorder, Live]:
        if self._parts is None:
            raise RuntimeError("the dashboard has no API client yet (Dashboard.attach)")
        return self._parts

    async def run(self) -> None:
        """The informers and the recorder, until cancelled. A server that refuses the first lists
        (a ServiceAccount without the ClusterRole: 401, 403) is asked again every ``RETRY``
        seconds, and the pages say why meanwhile."""
        _, watched, recorder, _ = self._attached()
        recording = asyncio.create_task(recorder.run(), name="dashboard recorder")
        try:
            while True:
                try:
                    await watched.run(self.synced)
                except ApiError as exc:
                    self.failure = f"the cluster refused its lists ({exc.status.code}): {exc.status.message}"
                    log.warning("dashboard: %s; trying again in %.0f s", self.failure, RETRY)
                    await asyncio.sleep(RETRY)
        finally:
            recording.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await recording

    def application(self) -> web.Application:
        app = web.Application(middlewares=[self.logins.middleware(), self._ready])
        get = app.router.add_get
        get("", self.index)
        get("/", self.index)
        get("/login", self.login)
        get("/assets/{name}", self.asset)
        app.router.add_post("/api/login-codes", self.login_code)
        get("/api/overview", self.overview)
        get("/api/jobs", self.jobs)
        get("/api/jobs/stream", self.jobs_stream)
        get("/api/jobs/{namespace}/{plural}/{name}", self.job)
        get("/api/jobs/{namespace}/{plural}/{name}/stream", self.job_stream)
        app.router.add_post("/api/jobs/{namespace}/{plural}/{name}/{action:suspend|resume|scale}", self.act)
        app.router.add_delete("/api/jobs/{namespace}/{plural}/{name}", self.delete)
        get("/api/logs/{namespace}/{pod}", self.logs)
        get("/api/queues", self.queues)
        get("/api/runtimes", self.runtimes)
        get("/api/history", self.history)
        get("/api/history/{uid}", self.history_job)
        get("/api/history/{uid}/logs/{pod}/{container}", self.history_log)
        get("/api/metrics/{uid}", self.metrics)
        return app

    # -- the front end and the login ----------------------------------------------------------------

    async def index(self, request: web.Request) -> web.StreamResponse:
        if request.path == PREFIX:
            raise web.HTTPPermanentRedirect(f"{PREFIX}/")
        if not self.logins.valid(request.cookies.get(COOKIE)):
            return web.Response(text=_LOGIN_NEEDED, status=401, content_type="text/html")
        page = self.static / "index.html"
        if not page.is_file():
            return web.Response(text=_MISSING_UI, status=503, content_type="text/html")
        return web.FileResponse(page, headers={"Cache-Control": "no-cache"})

    async def asset(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        path = self.static / "assets" / name
        if "/" in name or name.startswith(".") or not path.is_file():
            return not_found(f"asset {name!r}")
        # Vite names each asset by its content's hash: a name never changes meaning.
        return web.FileResponse(path, headers={"Cache-Control": "public, max-age=31536000, immutable"})

    async def login(self, request: web.Request) -> web.StreamResponse:
        session = self.logins.redeem(request.query.get("token", ""))
        if session is None:
            text = _LOGIN_NEEDED.replace("<p>", "<p>That login link was used or has expired. ", 1)
            return web.Response(text=text, status=401, content_type="text/html")
        response = web.HTTPSeeOther(f"{PREFIX}/")
        self.logins.cookie(response, session)
        return response

    async def login_code(self, request: web.Request) -> web.Response:
        if not self.logins.is_owner(request.headers.get("Authorization")):
            return status(401, "Unauthorized", "a login code is given to the plane's owner: the kubeconfig's token")
        code = self.logins.mint()
        return body({"code": code, "path": f"{PREFIX}/login?token={code}"}, 201)

    # -- jobs -------------------------------------------------------------------------------------

    @web.middleware
    async def _ready(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """The API's answers wait for the informers' first lists (a plane that has just started)."""
        waits = request.path.startswith(f"{PREFIX}/api/") and not request.path.endswith("/login-codes")
        if waits and not self.synced.is_set():
            if self.failure is not None:  # refused: say so now, not after SYNC_WAIT
                return status(503, "ServiceUnavailable", self.failure)
            try:
                await asyncio.wait_for(self.synced.wait(), SYNC_WAIT)
            except TimeoutError:
                why = self.failure or "the dashboard is still reading the cluster; try again"
                return status(503, "ServiceUnavailable", why)
        return await handler(request)

    async def overview(self, request: web.Request) -> web.Response:
        kinds = [_kind(k) for k in views.job_kinds() if k.plural in self.watched.jobs]  # those the cluster serves
        spaces = sorted({str(j["metadata"].get("namespace", "")) for j in self.watched.all_jobs()} | {"default"})
        queues = await catalog.queues(self.client)
        runtimes = await catalog.runtimes(self.client)
        return body(
            {
                "kinds": kinds,
                "namespaces": spaces,
                "queues": bool(queues["clusterQueues"] or queues["localQueues"]),
                "runtimes": bool(runtimes["items"]),
                "history": {
                    "maxJobs": self.store.max_jobs,
                    "maxAgeDays": self.store.max_age.total_seconds() / 86400,
                },
            }
        )

    async def jobs(self, request: web.Request) -> web.Response:
        return body({"items": [views.row(job) for job in self.watched.all_jobs()]})

    async def jobs_stream(self, request: web.Request) -> web.StreamResponse:
        return await self.live.jobs(request)

    def _job(self, request: web.Request) -> Obj | None:
        m = request.match_info
        return self.watched.job(m["namespace"], m["plural"], m["name"])

    def _detail_of(self, request: web.Request) -> Callable[[], Awaitable[Json | None]]:
        async def detail() -> Json | None:
            job = self._job(request)
            if job is None:
                return None
            uid = job["metadata"]["uid"]
            search = pages.trials_of(job, self.watched)
            trial_uids = pages.curve_jobs(search)

            def read() -> tuple[list[Json], list[Json], dict[str, list[Json]]]:
                trial_points = {name: self.store.points(u) for name, u in trial_uids.items()}
                return self.store.points(uid), self.store.checkpoints(uid), trial_points

            # The store's reads wait for its writer's transaction: off the event loop.
            points, checkpoints, trial_points = await asyncio.to_thread(read)
            return pages.detail(
                job, self.watched, points=points, checkpoints=checkpoints, search=search, trial_points=trial_points
            )

        return detail

    async def job(self, request: web.Request) -> web.Response:
        found = await self._detail_of(request)()
        return body(found) if found is not None else not_found(_name(request))

    async def job_stream(self, request: web.Request) -> web.StreamResponse:
        job = self._job(request)
        if job is None:
            return not_found(_name(request))
        return await self.live.page(request, job["metadata"]["uid"], self._detail_of(request))

    async def act(self, request: web.Request) -> web.Response:
        job = self._job(request)
        if job is None:
            return not_found(_name(request))
        action = request.match_info["action"]
        try:
            if action == "scale":
                try:
                    asked = await request.json()
                except ValueError:
                    return status(400, "BadRequest", 'the body must be JSON: {"replicas": N}')
                wanted = asked.get("replicas") if isinstance(asked, dict) else None
                if not isinstance(wanted, int) or isinstance(wanted, bool) or wanted < 0:
                    return status(422, "Invalid", "replicas: a whole number of replicas, 0 or more")
                written = await actions.scale(self.client, job, wanted)
            elif views.view_of(job).suspend_field is None:
                return status(422, "Invalid", f"a {job.get('kind')} cannot be suspended")
            else:
                written = await actions.set_suspended(self.client, job, action == "suspend")
        except ApiError as exc:
            return body(exc.status.to_dict(), exc.status.code or 500)
        return body(views.row(written))

    async def delete(self, request: web.Request) -> web.Response:
        job = self._job(request)
        if job is None:
            return not_found(_name(request))
        try:
            await actions.delete(self.client, job)
        except ApiError as exc:
            return body(exc.status.to_dict(), exc.status.code or 500)
        return body({})

    async def logs(self, request: web.Request) -> web.StreamResponse:
        """The pod's log as ``kubectl logs [-f]`` reads it, streamed while it follows."""
        m, q = request.match_info, request.query
        follow = q.get("follow") in ("1", "true")
        tail = int(q["tailLines"]) if q.get("tailLines", "").isdigit() else LOG_TAIL
        headers = {"Content-Type": "text/plain; charset=utf-8", "Cache-Control": "no-cache"}
        response = web.StreamResponse(headers=headers)
        try:
            lines = self.client.log(
                m["pod"], namespace=m["namespace"], container=q.get("container") or None, follow=follow, tail_lines=tail
            )
            first = await anext(aiter(lines), None)
        except ApiError as exc:
            return body(exc.status.to_dict(), exc.status.code or 500)
        await response.prepare(request)
        try:
            if first is not None:
                await response.write(first.encode())
                async for line in lines:
                    await response.write(line.encode())
        except ConnectionResetError:
            pass
        return response

    # -- beside the jobs ----------------------------------------------------------------------------

    async def queues(self, request: web.Request) -> web.Response:
        return body(await catalog.queues(self.client))

    async def runtimes(self, request: web.Request) -> web.Response:
        return body(await catalog.runtimes(self.client))

    async def history(self, request: web.Request) -> web.Response:
        q = request.query
        limit = int(q["limit"]) if q.get("limit", "").isdigit() else 200
        spaces, kind = q.get("namespace") or None, q.get("kind") or None
        rows = await asyncio.to_thread(self.store.rows, namespace=spaces, kind=kind, limit=limit)
        return body({"items": rows})

    async def history_job(self, request: web.Request) -> web.Response:
        uid = request.match_info["uid"]
        found = await asyncio.to_thread(self.store.detail, uid)
        return body(found) if found is not None else not_found(f"job {uid} in the history")

    async def history_log(self, request: web.Request) -> web.Response:
        m = request.match_info
        data = await asyncio.to_thread(self.store.log, m["uid"], m["pod"], m["container"])
        if data is None:
            return not_found(f"the log of {m['pod']}/{m['container']} in the history")
        return web.Response(body=data, content_type="text/plain", charset="utf-8")

    async def metrics(self, request: web.Request) -> web.Response:
        uid = request.match_info["uid"]
        job = self.watched.job_by_uid(uid)
        stored = await asyncio.to_thread(self.store.job, uid) if job is None else None
        if job is None and stored is None:
            return not_found(f"job {uid}")
        row = views.row(job if job is not None else stored)  # type: ignore[arg-type]
        return body({"row": row, "points": await asyncio.to_thread(self.store.points, uid)})


def _kind(entry: FamilyKind) -> dict[str, Any]:
    found = views.family_kind(entry.kind)
    return {
        "kind": entry.kind,
        "group": entry.group,
        "version": entry.version,
        "plural": entry.plural,
        "family": found[0].name if found else "",
        "scalable": (entry.group, entry.plural) in pages.scale_paths(),
    }


def _name(request: web.Request) -> str:
    m = request.match_info
    return f'{m["plural"]} "{m["name"]}" in namespace {m["namespace"]}'
