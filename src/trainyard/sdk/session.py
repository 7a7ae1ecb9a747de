"""The cluster a ``TrainingClient`` talks to: which kubeconfig, the lightkube client made from it,
the namespace and job kind a call that names none gets, and reading one job, which every other
call starts from.

Which kubeconfig, when none is passed: ``$TRAINYARD_HOME/kubeconfig`` when ``TRAINYARD_HOME`` is
set, else ``$KUBECONFIG``, else the default plane's (``~/.trainyard/kubeconfig``) when it exists,
else ``~/.kube/config`` or the in-cluster service account.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import httpx2
from lightkube import Client, KubeConfig
from lightkube.config.kubeconfig import SingleConfig

from trainyard.api.kindinfo import KindInfo
from trainyard.api.kinds import DEFAULT_KIND
from trainyard.client.resources import resource_for_kind, to_dict
from trainyard.sdk.errors import translated
from trainyard.sdk.kinds import kind_info

Job = dict[str, Any]
# The Kubeflow SDK's per-request default (seconds).
DEFAULT_REQUEST_TIMEOUT = 120.0


def default_kubeconfig() -> Path | None:
    """The kubeconfig ``TrainingClient()`` uses; None means lightkube's own default (~/.kube/config, in-cluster)."""
    # The same home as the plane's (trainyard.cluster.paths.default_home), which the SDK may not import.
    home = os.environ.get("TRAINYARD_HOME")
    if home:
        return Path(home) / "kubeconfig"
    if os.environ.get("KUBECONFIG"):
        return None
    plane = Path.home() / ".trainyard" / "kubeconfig"
    return plane if plane.exists() else None


def job_conditions(job: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list((job.get("status") or {}).get("conditions") or [])


def has_condition(conditions: Iterable[Mapping[str, Any]], type_: str) -> bool:
    return any(c.get("type") == type_ and c.get("status") == "True" for c in conditions)


class Session:
    """A kubeconfig's cluster as the SDK reaches it (``TrainingClient`` says what the arguments are)."""

    def __init__(
        self,
        config_file: Path | str | None = None,
        context: str | None = None,
        client_configuration: KubeConfig | SingleConfig | None = None,
        namespace: str | None = None,
        job_kind: str = DEFAULT_KIND,
        *,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    ) -> None:
        self.job_kind = self._info(job_kind).kind
        self.kubeconfig: Path | None = None
        config: KubeConfig | SingleConfig
        if client_configuration is not None:
            config = client_configuration
        else:
            path = Path(config_file) if config_file else default_kubeconfig()
            if path is not None and not path.exists():
                raise FileNotFoundError(
                    f"no kubeconfig at {path}; start the control plane with `yard up` or pass config_file="
                )
            self.kubeconfig = path
            config = KubeConfig.from_file(path) if path is not None else KubeConfig.from_env()
        if context is not None:
            if not isinstance(config, KubeConfig):
                raise ValueError("context= needs a kubeconfig, not a single client configuration")
            chosen = config.get(context_name=context)
            if chosen is None:
                raise ValueError(f"no context {context!r} in the kubeconfig")
            config = chosen
        self._config = config
        self._timeout = request_timeout
        self.client = self._new_client(namespace)
        self.namespace: str = namespace or self.client.namespace
        single = config if isinstance(config, SingleConfig) else config.get()
        self.server: str = single.cluster.server if single is not None else ""  # named in connection errors

    def _new_client(self, namespace: str | None = None) -> Client:
        return Client(
            self._config,
            namespace=namespace,
            field_manager="trainyard-sdk",
            timeout=httpx2.Timeout(self._timeout),
        )

    # -- helpers ---------------------------------------------------------------------------------

    def _info(self, job_kind: str | None) -> KindInfo:
        return kind_info(str(job_kind or getattr(self, "job_kind", DEFAULT_KIND)))

    def _ns(self, namespace: str | None) -> str:
        return namespace or self.namespace

    def _res(self, info: KindInfo) -> Any:
        return resource_for_kind(info.kind)

    def _job_kind(self, job_kind: str | None, kind: str | None) -> str | None:
        # ``kind=`` is the keyword earlier trainyard releases used; Kubeflow's is ``job_kind=``.
        return job_kind or kind

    def get_job(
        self,
        name: str,
        namespace: str | None = None,
        job_kind: str | None = None,
        timeout: float | None = None,
        *,
        kind: str | None = None,
    ) -> Job:
        """The job as stored; ``NotFoundError`` if there is none. ``timeout`` is accepted as Kubeflow's
        per-request timeout; the client's ``request_timeout`` applies to every request."""
        info = self._info(self._job_kind(job_kind, kind))
        with translated(self.server):
            return to_dict(self.client.get(self._res(info), name, namespace=self._ns(namespace)))
