"""What a ``pods/exec`` or ``pods/attach`` request asks for, checked as kube-apiserver and the kubelet check it.

The query carries ``command`` (repeated: an argv, never a shell line), ``container``, ``stdin``,
``stdout``, ``stderr`` and ``tty`` (``true``/``1``). The container is chosen as kube-apiserver's
``streamLocation`` chooses it (the only one, else the caller must name one); with a TTY stderr is
merged into stdout, as the kubelet does. ``exit_status`` and ``failure`` are the ``metav1.Status``
documents of the error channel (v4 and later, SPDY's v4 too), which clients turn into an exit code
(``NonZeroExitCode`` with an ``ExitCode`` cause) or an error message.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainyard.api.meta import Obj
from trainyard.cluster.server.apiserver import errors

TRUE = ("true", "1", "True", "TRUE")


@dataclass(frozen=True)
class Options:
    container: str
    command: tuple[str, ...] = ()
    """Empty for ``attach``."""
    stdin: bool = False
    stdout: bool = False
    stderr: bool = False
    tty: bool = False


def _flag(query: Mapping[str, str], key: str) -> bool:
    return query.get(key, "") in TRUE


def container_for(pod: Obj, container: str | None) -> str:
    """The container a request means, or the BadRequest kube-apiserver answers."""
    name = pod["metadata"]["name"]
    spec = pod.get("spec") or {}
    containers = [str(c["name"]) for c in spec.get("containers") or []]
    init = [c["name"] for c in spec.get("initContainers") or []]
    if not container:
        if len(containers) == 1:
            return containers[0]
        message = f"a container name must be specified for pod {name}, choose one of: [{' '.join(containers)}]"
        if init:
            message += f" or one of the init containers: [{' '.join(init)}]"
        raise errors.bad_request(message)
    if container not in containers + init:
        raise errors.bad_request(f"container {container} is not valid for pod {name}")
    return container


def parse(query: Mapping[str, str], commands: Sequence[str], pod: Obj, *, attach: bool) -> Options:
    """The options of an exec (``commands``: every ``command`` value) or attach request on ``pod``."""
    container = container_for(pod, query.get("container"))
    if not (pod.get("spec") or {}).get("nodeName"):
        raise errors.bad_request(f"pod {pod['metadata']['name']} does not have a host assigned")
    tty = _flag(query, "tty")
    stdin, stdout = _flag(query, "stdin"), _flag(query, "stdout")
    stderr = _flag(query, "stderr") and not tty  # combined with stdout on a terminal
    if not attach and not commands:
        raise errors.bad_request("you must specify at least one command for the container")
    if not (stdin or stdout or stderr):
        raise errors.bad_request("you must specify at least 1 of stdin, stdout, stderr")
    return Options(container, () if attach else tuple(commands), stdin, stdout, stderr, tty)


# -- the error channel ---------------------------------------------------------------------------------


def success() -> Obj:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}


def exit_status(code: int) -> Obj:
    """The Status of a command that exited with ``code`` (Success for 0)."""
    if code == 0:
        return success()
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f"command terminated with non-zero exit code: command terminated with exit code {code}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }


def failure(message: str) -> Obj:
    """A session that could not run (no such container on the node, say): an internal error, as upstream's."""
    return errors.ApiError(500, "InternalError", f"Internal error occurred: {message}").status()


def text_of(status: Mapping[str, Any]) -> str:
    """What the v1-v3 protocols put on the error channel: plain text, nothing on success."""
    if status.get("status") == "Success":
        return ""
    return str(status.get("message") or "")
