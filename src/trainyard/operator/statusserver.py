"""The status server: where training code reports progress and metrics, for TrainJobs and the v1 kinds.

``POST /apis/trainer.kubeflow.org/v1alpha1/namespaces/<ns>/trainjobs/<name>/status`` over HTTPS
with ``{"trainerStatus": {...}}`` (the official SDK's ``update_trainjob_status``), as upstream's
``pkg/statusserver``: the bearer token is checked with a ``TokenReview`` asking for the audience
of this TrainJob's endpoint (``frameworks.trainer.status.audience``), and must belong to a service
account of the TrainJob's namespace; the body is checked (``status.trainer_status``) and written
as ``status.trainerStatus`` with one merge patch of the status subresource, replacing the whole
``trainerStatus`` as upstream's apply does. The answer is the written ``trainerStatus``; failures
are ``Status`` objects: 401 without a bearer token, 403 for a token refused, 404 for an unknown
path or TrainJob, 413 over 64 KiB, 422 for an invalid body, 500 when the API cannot be asked.

Its second route serves every kind with ``KindInfo.training_progress`` (the ``kubeflow.org`` kinds,
MPIJob's ``v2beta1`` too; the plural is looked up in ``api.kinds``, no kind is named here):
``POST /apis/<group>/<version>/namespaces/<ns>/<plural>/<name>/trainingprogress`` with
``{"report": {...}}`` (``trainyard.runtime.progress.ProgressSink``). The token is checked the same
way, for the audience ``controller.progress.audience`` names; then the job is read, the report
merged into its ``status.trainingProgress`` (``controller.progress.merge``, which also checks the
report: 422) and written with a merge patch of the status subresource carrying the
``resourceVersion`` read, so that two reports (or a reconcile pass) never undo each other: on a
409 it reads and merges again, a few times (then 409). The answer is
``{"trainingProgress": <as written>}``. The reconciler reads it on its next pass (the write wakes
it), where ``runPolicy.earlyStopping`` may end the job.

Every operator replica serves it, leader or not (it only writes status). The embedded plane
serves it on ``127.0.0.1`` with its own certificate; a cluster's operator on ``--status-server-port``
with the webhook's certificate, behind the operator's Service.
"""

from __future__ import annotations

import json
import logging
import ssl
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from lightkube import ApiError, AsyncClient
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.authentication_v1 import TokenReview
from lightkube.types import PatchType
from pydantic import ValidationError

from trainyard.api import trainer
from trainyard.api.common import EarlyStopping
from trainyard.api.kindinfo import KindInfo
from trainyard.api.kinds import KINDS
from trainyard.client.resources import is_status, job_resource, to_dict
from trainyard.controller import progress
from trainyard.frameworks.trainer import status
from trainyard.kit.applier import merge_patch
from trainyard.operator.serving import Endpoint

log = logging.getLogger(__name__)

MAX_BODY = 1 << 16
CONFLICT_RETRIES = 5
"""Read-merge-write attempts of one progress report while the job keeps changing under it."""


def _failure(code: int, reason: str, message: str) -> web.Response:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure"}
    body |= {"message": message, "reason": reason, "code": code}
    return web.json_response(body, status=code)


def bearer(header: str | None) -> str:
    """The credential of an RFC 7235 ``Bearer`` header (scheme case-insensitive), else ""."""
    parts = (header or "").split()
    return parts[1] if len(parts) == 2 and parts[0].lower() == "bearer" else ""


class StatusHandler:
    def __init__(self, client: AsyncClient, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.client = client
        self.clock = clock
        self.res = create_namespaced_resource(trainer.GROUP, trainer.VERSION, trainer.TRAINJOB, trainer.TRAINJOBS)
        self.progress_kinds = {(i.group, i.version, i.plural): i for i in KINDS.values() if i.training_progress}

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_route("*", status.path("{namespace}", "{name}"), self.handle)
        route = f"/apis/{{group}}/{{version}}/namespaces/{{namespace}}/{{plural}}/{{name}}/{progress.ROUTE}"
        app.router.add_route("*", route, self.training_progress)
        app.router.add_route("*", "/{tail:.*}", self.unknown)
        return app

    async def unknown(self, _: web.Request) -> web.Response:
        return _failure(404, "NotFound", "Not found")

    async def authorized(self, token: str, namespace: str, wanted: str) -> bool:
        """Whether the API server vouches for ``token``: audience ``wanted``, a pod of ``namespace``."""
        review = TokenReview.from_dict(
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "metadata": {},
                "spec": {"token": token, "audiences": [wanted]},
            }
        )
        answer: Any = await self.client.create(review)
        result = answer.status
        if result is None or not result.authenticated or result.user is None:
            return False
        if result.audiences is not None and wanted not in result.audiences:
            return False
        # a service account's token: "system:serviceaccount:<namespace>:<name>"
        return str(result.user.username or "").startswith(f"system:serviceaccount:{namespace}:")

    async def _admitted(self, request: web.Request, namespace: str, wanted: str) -> bytes | web.Response:
        """The body of a POST whose token is good for ``wanted`` (an audience), else the failure to answer."""
        if request.method != "POST":
            return _failure(405, "MethodNotAllowed", "only POST is served here")
        token = bearer(request.headers.get("Authorization"))
        if not token:
            return _failure(401, "Unauthorized", "Unauthorized: a bearer token is required")
        try:
            allowed = await self.authorized(token, namespace, wanted)
        except Exception:
            log.exception("status server: cannot review a token for %s", wanted)
            return _failure(500, "InternalError", "Internal error")
        if not allowed:
            return _failure(403, "Forbidden", "Forbidden")
        if request.content_length is not None and request.content_length > MAX_BODY:
            return _failure(413, "RequestEntityTooLarge", "Payload too large")
        raw = await request.content.read(MAX_BODY + 1)
        if len(raw) > MAX_BODY:
            return _failure(413, "RequestEntityTooLarge", "Payload too large")
        return raw

    async def handle(self, request: web.Request) -> web.Response:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        raw = await self._admitted(request, namespace, status.audience(namespace, name))
        if isinstance(raw, web.Response):
            return raw
        try:
            wanted = status.trainer_status(json.loads(raw or b"null"), self.clock())
        except ValueError as exc:  # json's and InvalidStatus
            message = str(exc) if isinstance(exc, status.InvalidStatus) else "Invalid payload"
            return _failure(422, "Invalid", message)
        if wanted is None:
            return web.json_response({})
        try:
            await self.client.patch(
                self.res.Status, name, status.merge_patch(wanted), namespace=namespace, patch_type=PatchType.MERGE
            )
        except ApiError as exc:
            if is_status(exc, 404):
                return _failure(404, "NotFound", "Train job not found")
            if is_status(exc, 422) or is_status(exc, 400):
                return _failure(422, "Invalid", exc.status.message or "Validation failed")
            log.warning("status server: patching %s/%s failed: %s", namespace, name, exc)
            return _failure(500, "InternalError", "Internal error")
        return web.json_response({"trainerStatus": wanted})

    # -- the kubeflow.org/v1 jobs' route ----------------------------------------------------------

    async def training_progress(self, request: web.Request) -> web.Response:
        """``POST .../<plural>/<name>/trainingprogress``: merge a report into ``status.trainingProgress``."""
        m = request.match_info
        info = self.progress_kinds.get((m["group"], m["version"], m["plural"]))
        if info is None:
            return _failure(404, "NotFound", "Not found")
        namespace, name = m["namespace"], m["name"]
        raw = await self._admitted(request, namespace, progress.audience(info, namespace, name))
        if isinstance(raw, web.Response):
            return raw
        try:
            report = progress.report_of(json.loads(raw or b"null"))
        except ValueError as exc:  # json's and InvalidReport
            message = str(exc) if isinstance(exc, progress.InvalidReport) else "Invalid payload: not JSON"
            return _failure(422, "Invalid", message)
        for _ in range(CONFLICT_RETRIES):
            answer = await self._merge_once(info, namespace, name, report)
            if answer is not None:
                return answer
        return _failure(409, "Conflict", f"{info.kind} {name} kept changing; report again")

    async def _merge_once(self, info: KindInfo, namespace: str, name: str, report: Any) -> web.Response | None:
        """One optimistic read-merge-write; None on a conflict (the job changed since it was read)."""
        res = job_resource(info)
        try:
            job = to_dict(await self.client.get(res, name, namespace=namespace))
        except ApiError as exc:
            if is_status(exc, 404):
                return _failure(404, "NotFound", f"{info.kind} {name} not found")
            log.warning("status server: reading %s %s/%s failed: %s", info.kind, namespace, name, exc)
            return _failure(500, "InternalError", "Internal error")
        old = (job.get("status") or {}).get("trainingProgress")
        try:
            merged = progress.merge(old, report, _early_stopping(job), self.clock())
        except progress.InvalidReport as exc:
            return _failure(422, "Invalid", str(exc))
        patch = {
            "metadata": {"resourceVersion": job["metadata"]["resourceVersion"]},
            "status": {"trainingProgress": merge_patch(old, merged)},
        }
        try:
            await self.client.patch(res.Status, name, patch, namespace=namespace, patch_type=PatchType.MERGE)
        except ApiError as exc:
            if is_status(exc, 409):
                return None
            if is_status(exc, 404):
                return _failure(404, "NotFound", f"{info.kind} {name} not found")
            if is_status(exc, 422) or is_status(exc, 400):
                return _failure(422, "Invalid", exc.status.message or "Validation failed")
            log.warning("status server: patching %s %s/%s failed: %s", info.kind, namespace, name, exc)
            return _failure(500, "InternalError", "Internal error")
        return web.json_response({"trainingProgress": merged})


def _early_stopping(job: dict[str, Any]) -> EarlyStopping | None:
    raw = ((job.get("spec") or {}).get("runPolicy") or {}).get("earlyStopping")
    if not isinstance(raw, dict):
        return None
    try:
        return EarlyStopping.model_validate(raw)
    except ValidationError:  # admission checks it; a job stored before that has no policy here
        return None


async def serve_status(client: AsyncClient, address: tuple[str, int], context: ssl.SSLContext) -> Endpoint:
    """Serve the status endpoint over HTTPS at ``address`` (port 0: any free one; see ``Endpoint.port``)."""
    runner = web.AppRunner(StatusHandler(client).app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, address[0], address[1], ssl_context=context, reuse_address=True)
    await site.start()
    port = address[1]
    server = site._server
    if port == 0 and server is not None and hasattr(server, "sockets"):
        port = server.sockets[0].getsockname()[1]
    log.info("serving the status server (TrainJob and kubeflow.org/v1 progress) on https://%s:%s", address[0], port)
    return Endpoint(runner, address[0], port)
