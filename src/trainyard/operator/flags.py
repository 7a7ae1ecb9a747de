"""The operator's command line: upstream's flags (reference §4.2), in Go's value syntax, as typed values.

``parse`` and ``run`` read ``python -m trainyard.operator``'s arguments into ``OperatorOptions``;
``operator.main`` turns those into settings and runs. The flags are this module's, the webhook's
(``webhook.webhook_flags``) and every framework plugin's (``frameworks.capabilities.OperatorFlag``),
so a plugin registered later (a test's) brings its flags to the next parse.

Deployments written for the Kubeflow Training Operator pass Go flag values: durations such as
``15s`` or ``1m30s`` (``go_duration``), and ``--leader-elect``, a boolean that stands alone or takes
``=true``/``=false`` (``go_bool``, ``go_style``).
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NewType

import typer

from trainyard.api.families import job_kinds
from trainyard.frameworks.capabilities import OperatorFlag
from trainyard.frameworks.network import NetworkMode
from trainyard.frameworks.registry import operator_flags
from trainyard.frameworks.trainer import status
from trainyard.operator.commandline import composed, parameters, run
from trainyard.operator.restclient import DEFAULT_RATE_LIMIT
from trainyard.operator.settings import DEFAULT_HOST_PORTS, HOST_PORTS_ENV
from trainyard.operator.webhook import WebhookSettings, webhook_flags

PROG = "python -m trainyard.operator"
DESCRIPTION = "The trainyard training operator (Kubeflow Training Operator v1 compatible)."
DEFAULT_LEASE_ID = "1ca428e5.training-operator.kubeflow.org"

LogLevel = Literal["debug", "error", "info", "warn"]
"""``--zap-log-level``'s choices."""

GO_BOOLS = ("--leader-elect",)
"""Boolean flags that, as in Go's flag package, stand alone for true or take ``=VALUE``."""

GoBool = NewType("GoBool", bool)
"""A bool that typer reads as a flag's value (``go_bool``): a plain ``bool`` parameter is an on/off switch."""


def go_bool(value: str) -> GoBool:
    """Go's ``strconv.ParseBool``, as upstream's ``--flag=false`` spelling needs."""
    # str(): typer passes the parameter's default (a bool) through here too.
    lowered = str(value).lower()
    if lowered in ("1", "t", "true"):
        return GoBool(True)
    if lowered in ("0", "f", "false"):
        return GoBool(False)
    raise typer.BadParameter(f"invalid boolean value {value!r}")


def go_duration(value: str) -> float:
    """Seconds of a Go duration (``15s``, ``1m30s``, ``500ms``) or of a plain number."""
    try:
        return float(value)
    except ValueError:
        pass
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", value)
    if not parts or "".join(n + u for n, u in parts) != value:
        raise typer.BadParameter(f"invalid duration {value!r} (examples: 15s, 1m30s, 500ms)")
    return sum(float(n) * units[u] for n, u in parts)


def go_style(argv: Sequence[str]) -> list[str]:
    """``argv`` with a ``GO_BOOLS`` flag that stands alone given its value, ``=true``.

    typer's options either always or never take a value; these take one when it follows (``--leader-elect
    false``, as the parser before typer took it) and mean true when an option or nothing follows.
    """
    out: list[str] = []
    for i, arg in enumerate(argv):
        following = argv[i + 1] if i + 1 < len(argv) else None
        stands_alone = following is None or following.startswith("-")
        out.append(f"{arg}=true" if arg in GO_BOOLS and stands_alone else arg)
    return out


@dataclass(frozen=True)
class ElectionOptions:
    """The leader election flags; ``operator.main.election_from`` checks and completes them."""

    leader_elect: bool
    leader_election_id: str
    leader_election_namespace: str | None
    leader_election_identity: str | None
    leader_elect_lease_duration: float
    leader_elect_renew_deadline: float
    leader_elect_retry_period: float


@dataclass(frozen=True)
class OperatorOptions:
    """What the operator's flags say, typed; ``operator.main.settings_from`` checks and builds the settings."""

    kubeconfig: str | None
    namespace: str
    enable_scheme: tuple[str, ...]
    controller_threads: int
    kube_api_qps: float
    kube_api_burst: int
    gang_scheduler_name: str
    election: ElectionOptions
    metrics_bind_address: str
    health_probe_bind_address: str
    webhook: WebhookSettings
    """Of every kind: the operator narrows it to the kinds it serves."""
    status_server_port: int
    status_server_url: str
    pending_timeout: float | None
    observations: str
    network_mode: NetworkMode
    node_address: str
    host_ports: str
    zap_log_level: LogLevel
    plugin_flags: Mapping[str, Any]
    """The framework plugins' flags, by ``OperatorFlag.dest``."""


def _flag(*names: str, **settings: Any) -> Any:
    """A ``typer.Option`` whose help says its default itself, as upstream's does (no ``[default: ...]``)."""
    return typer.Option(*names, show_default=False, **settings)


def _options(
    kubeconfig: Annotated[str | None, _flag(help="kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube)")] = None,
    namespace: Annotated[
        str,
        _flag(
            envvar="KUBEFLOW_NAMESPACE",
            show_envvar=False,
            help="namespace to watch (default $KUBEFLOW_NAMESPACE; empty: the whole cluster)",
        ),
    ] = "",
    enable_scheme: Annotated[
        list[str] | None,
        _flag(
            metavar="KIND",
            help=f"reconcile this kind (repeatable, case-insensitive; default: all of {', '.join(job_kinds())})",
        ),
    ] = None,
    controller_threads: Annotated[int, _flag(help="reconcile workers per kind (default 1)")] = 1,
    # client-go's flowcontrol.NewTokenBucketRateLimiter(qps, burst), as upstream's main.go builds it
    kube_api_qps: Annotated[
        float,
        _flag(
            metavar="QPS",
            help="requests per second the operator's API client may send, sustained (0 or less: no limit; "
            f"default {DEFAULT_RATE_LIMIT.qps:g})",
        ),
    ] = DEFAULT_RATE_LIMIT.qps,
    kube_api_burst: Annotated[
        int,
        _flag(
            metavar="N",
            help=f"requests the API client may send at once above that rate (default {DEFAULT_RATE_LIMIT.burst})",
        ),
    ] = DEFAULT_RATE_LIMIT.burst,
    gang_scheduler_name: Annotated[
        str, _flag(help="gang scheduling: 'volcano', or any other name for scheduler-plugins (default: none)")
    ] = "",
    leader_elect: Annotated[
        GoBool,
        _flag(
            "--leader-elect",
            parser=go_bool,
            metavar="[=BOOL]",
            help="elect a leader through a coordination.k8s.io Lease so that only one replica reconciles",
        ),
    ] = GoBool(False),
    leader_election_id: Annotated[str, _flag(help=f"Lease name (default {DEFAULT_LEASE_ID})")] = DEFAULT_LEASE_ID,
    leader_election_namespace: Annotated[
        str | None,
        _flag(help="Lease namespace (default: the pod's namespace in-cluster, else 'default')"),
    ] = None,
    leader_election_identity: Annotated[str | None, _flag(help="this replica's identity (default host_uuid)")] = None,
    leader_elect_lease_duration: Annotated[float, _flag(parser=go_duration, metavar="DURATION")] = 15.0,
    leader_elect_renew_deadline: Annotated[float, _flag(parser=go_duration, metavar="DURATION")] = 10.0,
    leader_elect_retry_period: Annotated[float, _flag(parser=go_duration, metavar="DURATION")] = 2.0,
    metrics_bind_address: Annotated[str, _flag(help="where /metrics is served (0: off)")] = ":8080",
    health_probe_bind_address: Annotated[str, _flag(help="where /healthz and /readyz are served (0: off)")] = ":8081",
    status_server_port: Annotated[
        int,
        _flag(
            help="HTTPS port of the TrainJob status server (upstream's TrainJobStatus; served with the webhook's "
            f"certificate and its ca.crt; 0: off; default {status.DEFAULT_PORT})",
        ),
    ] = status.DEFAULT_PORT,
    status_server_url: Annotated[
        str,
        _flag(
            help="how trainer pods reach it (default https://training-operator.<operator namespace>.svc:<port>)",
        ),
    ] = "",
    pending_timeout: Annotated[
        float | None,
        _flag(
            parser=go_duration,
            metavar="DURATION",
            help="a job whose pod stays Pending this long gets a Pending condition naming why (default 5m; 0: never)",
        ),
    ] = None,
    observations: Annotated[
        str,
        _flag(
            metavar="PATH",
            help="the SQLite file Katib Trials' collected metrics are kept in (medianstop reads them; "
            "default: memory, re-read from the pods' logs after a restart)",
        ),
    ] = "",
    network_mode: Annotated[
        NetworkMode,
        _flag(
            help="cluster-dns: replicas find each other through headless Services (a real cluster); "
            "host: replicas share one machine's network (the embedded plane)",
        ),
    ] = NetworkMode.CLUSTER_DNS,
    node_address: Annotated[str, _flag(help="host mode: the address replicas listen on")] = "127.0.0.1",
    host_ports: Annotated[
        str,
        _flag(
            envvar=HOST_PORTS_ENV,
            show_envvar=False,
            metavar="LOW-HIGH",
            help=f"host mode: the range listening ports are allocated from, per job (default ${HOST_PORTS_ENV} or "
            f"{DEFAULT_HOST_PORTS})",
        ),
    ] = DEFAULT_HOST_PORTS,
    zap_log_level: Annotated[LogLevel, _flag(help="log level")] = "info",
    **more: Any,
) -> OperatorOptions:
    """The options of the flags above and of ``more``: the webhook's and the framework plugins' flags."""
    webhook = webhook_flags(**{p.name: more.pop(p.name) for p in parameters(webhook_flags)})
    election = ElectionOptions(
        leader_elect=leader_elect,
        leader_election_id=leader_election_id,
        leader_election_namespace=leader_election_namespace,
        leader_election_identity=leader_election_identity,
        leader_elect_lease_duration=leader_elect_lease_duration,
        leader_elect_renew_deadline=leader_elect_renew_deadline,
        leader_elect_retry_period=leader_elect_retry_period,
    )
    return OperatorOptions(
        kubeconfig=kubeconfig,
        namespace=namespace,
        enable_scheme=tuple(enable_scheme or ()),
        controller_threads=controller_threads,
        kube_api_qps=kube_api_qps,
        kube_api_burst=kube_api_burst,
        gang_scheduler_name=gang_scheduler_name,
        election=election,
        metrics_bind_address=metrics_bind_address,
        health_probe_bind_address=health_probe_bind_address,
        webhook=webhook,
        status_server_port=status_server_port,
        status_server_url=status_server_url,
        pending_timeout=pending_timeout,
        observations=observations,
        network_mode=network_mode,
        node_address=node_address,
        host_ports=host_ports,
        zap_log_level=zap_log_level,
        plugin_flags=more,
    )


def _plugin_parameter(flag: OperatorFlag) -> inspect.Parameter:
    kind: Any = flag.type if flag.default is not None else flag.type | None
    annotation = Annotated[kind, _flag(flag.name, help=flag.help)]
    return inspect.Parameter(flag.dest, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=flag.default)


def _command(then: Callable[[OperatorOptions], int]) -> Callable[..., None]:
    # The endpoints' flags, the webhook's among them, before the plugins' (e.g. PyTorch's init container).
    plugins = [_plugin_parameter(flag) for plugin in operator_flags() for flag in plugin.operator_flags]
    return composed(
        lambda **values: then(_options(**values)), [*parameters(_options), *parameters(webhook_flags), *plugins]
    )


def run_with(then: Callable[[OperatorOptions], int], argv: Sequence[str] | None = None) -> None:
    """Parse ``argv`` (default: this process's arguments) and exit with the code ``then`` gives for its options.

    A flag refused ends the process with 2 and the usage, ``-h``/``--help`` with 0, as before typer.
    """
    run(_command(then), go_style(sys.argv[1:] if argv is None else argv), prog=PROG, help=DESCRIPTION)


def parse(argv: Sequence[str]) -> OperatorOptions:
    """The options ``argv`` gives, running nothing; a refused flag raises ``typer.BadParameter`` (or a sibling)."""
    parsed: list[OperatorOptions] = []

    def keep(options: OperatorOptions) -> int:
        parsed.append(options)
        return 0

    run(_command(keep), go_style(argv), prog=PROG, help=DESCRIPTION, standalone=False)
    return parsed[0]
