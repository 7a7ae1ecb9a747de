"""Jobs built from arguments rather than manifests: a Python function (or an image) run on N replicas.

``job_from_function`` builds the job that ``TrainingClient.create_job(train_func=...)`` creates,
with the Kubeflow SDK's shape: ``num_workers`` replicas sharing one pod template, whose default
container runs ``bash -c SCRIPT``. The script writes the function's source (plus a call to it) to
a fresh temporary directory and runs it. What differs by kind comes from the kind's plugin
(``frameworks.capabilities.FunctionJobs``): the replica roles, the default image and the command
the file runs under (a PyTorchJob: one Master and ``num_workers - 1`` Workers, ``torchrun`` when
distributed so that it takes its rendezvous from the operator's ``PET_*`` variables, else plain
``python -u``); a kind whose plugin has no such capability is refused. ``packages_to_install`` go
into that directory (``pip --target``), never into the image's or the plane's own Python environment.

Objects from other clients (the Kubeflow SDK's and the ``kubernetes`` client's generated models,
pydantic models, lightkube objects) become plain manifests through ``to_manifest``.
"""

from __future__ import annotations

import ast
import datetime
import inspect
import shlex
import textwrap
from collections.abc import Callable, Mapping
from typing import Any

from trainyard.api.kindinfo import KindInfo
from trainyard.api.kinds import DEFAULT_KIND, KINDS
from trainyard.frameworks.capabilities import FunctionJobs
from trainyard.frameworks.registry import function_jobs

DEFAULT_PIP_INDEX_URL = "https://pypi.org/simple"
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# Istio's sidecar would keep a finished replica's pod running; the Kubeflow SDK turns it off too.
ISTIO_INJECT = "sidecar.istio.io/inject"
_EOF = "TRAINYARD_FUNCTION_EOF"


def to_manifest(obj: Any) -> Any:
    """The plain JSON-shaped form of ``obj``: dicts, lists, strings, numbers (camelCase keys)."""
    if obj is None or isinstance(obj, str | int | float | bool):
        return obj
    if isinstance(obj, Mapping):
        return {str(k): to_manifest(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list | tuple):
        return [to_manifest(v) for v in obj]
    if isinstance(obj, datetime.datetime):
        return obj.isoformat()
    # openapi-generator models (kubernetes client, Kubeflow SDK): snake_case attributes, wire names in attribute_map.
    attribute_map = getattr(obj, "attribute_map", None)
    if isinstance(attribute_map, dict) and hasattr(obj, "openapi_types"):
        return {
            wire: to_manifest(getattr(obj, attr))
            for attr, wire in attribute_map.items()
            if getattr(obj, attr, None) is not None
        }
    dump = getattr(obj, "model_dump", None)  # pydantic (trainyard.api models)
    if callable(dump):
        return dump(by_alias=True, exclude_none=True, mode="json")
    to_dict = getattr(obj, "to_dict", None)  # lightkube objects
    if callable(to_dict):
        return to_manifest(to_dict())
    raise TypeError(f"cannot turn a {type(obj).__name__} into a Kubernetes manifest")


def function_source(func: Callable[..., Any]) -> str:
    if not callable(func):
        raise ValueError(f"train_func must be callable, got {type(func).__name__}")
    try:
        source = inspect.getsource(func)
    except (OSError, TypeError) as exc:
        raise ValueError(
            f"cannot read the source of {getattr(func, '__name__', func)!r} ({exc}); define it with `def` in a file"
        ) from exc
    source = textwrap.dedent(source)
    name = getattr(func, "__name__", "")
    if not name.isidentifier():
        raise ValueError("train_func must be a function defined with `def` (not a lambda)")
    return source


def program(func: Callable[..., Any], parameters: Mapping[str, Any] | None) -> str:
    """The Python file a replica runs: the function's source and a call to it."""
    source = function_source(func)
    if parameters is None:
        call = f"{func.__name__}()"
    else:
        text = repr(dict(parameters))
        try:
            same = ast.literal_eval(text) == dict(parameters)
        except (ValueError, SyntaxError):
            same = False
        if not same:
            raise ValueError("parameters must hold only literals (str, numbers, bools, None, lists, dicts)")
        call = f"{func.__name__}({text})"
    # Annotations stay unevaluated: the names they use (``Any``, ...) were imports of the caller's module.
    return f"from __future__ import annotations\n\n{source}\n\n{call}\n{_TEARDOWN}"


# Run after the function returns. A default process group still alive at interpreter exit can abort
# the replica (gloo: "terminate called without an active exception", SIGABRT) after it has done its
# work; the failed replica is restarted alone, and its new torchrun joins the master agent's TCPStore,
# which still holds the gloo address of the master's exited rank 0: gloo's connect is refused.
_TEARDOWN = """
import sys as _trainyard_sys

_trainyard_dist = _trainyard_sys.modules.get("torch.distributed")
if _trainyard_dist is not None and _trainyard_dist.is_available() and _trainyard_dist.is_initialized():
    _trainyard_dist.destroy_process_group()
"""


def script(
    code: str,
    *,
    entrypoint: str,
    packages_to_install: list[str] | None = None,
    pip_index_url: str = DEFAULT_PIP_INDEX_URL,
    file_name: str = "trainyard_train_func.py",
) -> str:
    """The ``bash -c`` script of a function replica."""
    if any(line.strip() == _EOF for line in code.splitlines()):
        raise ValueError(f"the function's source may not contain a line {_EOF!r}")
    lines = ["set -e", 'program_path="$(mktemp -d)"']
    if packages_to_install:
        packages = " ".join(shlex.quote(str(p)) for p in packages_to_install)
        lines += [
            # Into the job's own directory: the image's (or, locally, the plane's) Python stays untouched.
            "PIP_DISABLE_PIP_VERSION_CHECK=1 python -m pip install --quiet --no-warn-script-location"
            f' --target "$program_path/packages" --index-url {shlex.quote(pip_index_url)} {packages}',
            'export PYTHONPATH="$program_path/packages${PYTHONPATH:+:$PYTHONPATH}"',
        ]
    # A quoted delimiter: the source reaches the file byte for byte, no shell expansion of `$`.
    lines += [f"cat > \"$program_path/{file_name}\" <<'{_EOF}'", code.rstrip("\n"), _EOF]
    lines.append(f'exec {entrypoint} "$program_path/{file_name}"')
    return "\n".join(lines) + "\n"


def resources(spec: Any) -> dict[str, Any] | None:
    """``resources_per_worker`` as the Kubeflow SDK reads it: ``{"cpu": 2, "memory": "4Gi", "gpu": 1}``.

    A mapping with ``requests``/``limits`` keys (or a ``V1ResourceRequirements``) is used as it is;
    otherwise each key is both request and limit, and ``gpu`` means ``nvidia.com/gpu``.
    """
    if spec is None:
        return None
    plain = to_manifest(spec)
    if not isinstance(plain, dict):
        raise ValueError("resources_per_worker must be a mapping such as {'cpu': '1', 'memory': '2Gi'}")
    if set(plain) & {"requests", "limits", "claims"}:
        return plain
    amounts = {}
    for key, value in plain.items():
        name = "nvidia.com/gpu" if key.lower() == "gpu" else key.lower()
        amounts[name] = str(value)
    return {"requests": dict(amounts), "limits": dict(amounts)}


def env_list(env_vars: Any) -> list[dict[str, Any]] | None:
    if env_vars is None:
        return None
    if isinstance(env_vars, Mapping):
        return [{"name": str(k), "value": str(v)} for k, v in env_vars.items()]
    plain = to_manifest(list(env_vars))
    if not all(isinstance(e, dict) and "name" in e for e in plain):
        raise ValueError("env_vars must be a mapping or a list of {'name': ..., 'value': ...}")
    return list(plain)


def layout(kind: str) -> FunctionJobs:
    """The plugin that lays out a function job of ``kind``; ValueError for a kind that cannot run one."""
    plugin = function_jobs(kind)
    if plugin is None:
        able = " or ".join(f"{k}s" for k in KINDS if function_jobs(k) is not None)
        raise ValueError(f"jobs from a function or an image are {able}, not {kind}")
    return plugin


def function_job(
    *,
    info: KindInfo,
    plugin: FunctionJobs,
    name: str,
    namespace: str,
    container: dict[str, Any],
    num_workers: int,
    num_procs_per_worker: int | str | None = None,
    roles: Mapping[str, int] | None = None,
    volumes: list[Any] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """``num_workers`` replicas of one pod template, in the roles the kind's plugin gives them
    (``roles``: the counts of the kind's other replica types, by type)."""
    if num_workers < 1:
        raise ValueError(f"num_workers must be at least 1, got {num_workers}")
    pod_spec: dict[str, Any] = {"containers": [container]}
    if volumes:
        pod_spec["volumes"] = to_manifest(list(volumes))
    template = {"metadata": {"annotations": {ISTIO_INJECT: "false"}}, "spec": pod_spec}
    spec = plugin.function_spec(template, num_workers, num_procs_per_worker, roles or {})
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"apiVersion": info.api_version, "kind": info.kind, "metadata": metadata, "spec": spec}


def job_from_function(
    *,
    name: str,
    namespace: str,
    train_func: Callable[..., Any] | None = None,
    parameters: Mapping[str, Any] | None = None,
    base_image: str | None = None,
    num_workers: int = 1,
    num_procs_per_worker: int | str | None = None,
    resources_per_worker: Any = None,
    packages_to_install: list[str] | None = None,
    pip_index_url: str = DEFAULT_PIP_INDEX_URL,
    env_vars: Any = None,
    volumes: list[Any] | None = None,
    volume_mounts: list[Any] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    kind: str = DEFAULT_KIND,
    roles: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """The job of ``kind`` running ``train_func`` (or, without one, ``base_image``'s own entrypoint);
    ``roles``: its other replica types' counts (``FunctionJobs.function_roles``)."""
    info = KINDS[kind]
    plugin = layout(kind)
    if len(volumes or []) != len(volume_mounts or []):
        raise ValueError(
            f"volumes and volume_mounts must have the same length: {len(volumes or [])} vs {len(volume_mounts or [])}"
        )
    container: dict[str, Any] = {"name": info.default_container, "image": base_image or plugin.function_image}
    if train_func is not None:
        container["command"] = ["bash", "-c"]
        container["args"] = [
            script(
                program(train_func, parameters),
                entrypoint=plugin.function_entrypoint(num_workers, num_procs_per_worker),
                packages_to_install=packages_to_install,
                pip_index_url=pip_index_url,
            )
        ]
    elif packages_to_install:
        raise ValueError("packages_to_install needs train_func (it is installed before the function runs)")
    if (res := resources(resources_per_worker)) is not None:
        container["resources"] = res
    if (env := env_list(env_vars)) is not None:
        container["env"] = env
    if volume_mounts:
        container["volumeMounts"] = to_manifest(list(volume_mounts))
    return function_job(
        info=info,
        plugin=plugin,
        name=name,
        namespace=namespace,
        container=container,
        num_workers=num_workers,
        num_procs_per_worker=num_procs_per_worker,
        roles=roles,
        volumes=volumes,
        labels=labels,
        annotations=annotations,
    )
