"""``yard up | down | status | kubeconfig``: the embedded control plane's lifecycle."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from trainyard.api.podgroup import SCHEDULER_PLUGINS_SCHEDULER
from trainyard.cli import autoscalingflags, failureflags, nodeflags, planestatus
from trainyard.cli.common import GLOBALS
from trainyard.cli.nodeflags import NodeFlags
from trainyard.cluster.clients.node import backoff, containerlogs
from trainyard.cluster.clients.node.registration import DEFAULT_LEASE_SECONDS
from trainyard.cluster.paths import DEFAULT_PORT, PRIVATE_UMASK, Layout, SharedHomeError, make_private
from trainyard.cluster.server.apiserver import tokenlife

START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
# How long containers left by a killed plane get between SIGTERM and SIGKILL on `yard down`.
LEFTOVER_GRACE = 10.0


def register(app: typer.Typer) -> None:
    """``up``, ``down``, ``status`` and ``kubeconfig``: flags as they always were (scripts and tests use them)."""

    @app.command(help="Start the embedded control plane (in the background by default).")
    def up(
        port: Annotated[
            int, typer.Option(help=f"API server port on 127.0.0.1 (default {DEFAULT_PORT})")
        ] = DEFAULT_PORT,
        foreground: Annotated[bool, typer.Option("--foreground", help="run in this terminal until Ctrl-C")] = False,
        operator: Annotated[
            bool,
            typer.Option(
                "--operator/--no-operator",
                help="--no-operator starts the plane without its in-process operator (run one with `yard operator`)",
            ),
        ] = True,
        secure: Annotated[
            bool | None,
            typer.Option(
                "--secure/--insecure",
                " /--no-secure",
                help="--secure (the default) serves HTTPS with a self-signed CA and a bearer token that only the "
                "0600 kubeconfig holds (kept in $TRAINYARD_HOME/pki); --insecure (alias --no-secure) opts in to plain "
                "http on loopback with no authentication, which every local user can use; a plain `yard up` serves "
                "as the last one of this home was asked to",
                show_default=False,
            ),
        ] = None,
        workspace: Annotated[
            Path | None,
            typer.Option(help="directory that stands for an image's /workspace (default: the current directory)"),
        ] = None,
        restart_backoff: Annotated[
            float | None,
            typer.Option(
                metavar="SECONDS",
                help="first crash-loop back-off of a restarting container; doubles to 30x, reset after a 60x clean "
                f"run (default ${backoff.ENV} or the kubelet's {backoff.KUBELET_BASE:g}s, so 5m cap and 10m reset)",
            ),
        ] = None,
        gang_scheduler_name: Annotated[
            str | None,
            typer.Option(
                metavar="NAME",
                help="gang scheduling of jobs through PodGroups, as the operator's flag: scheduler-plugins' with the "
                f"plane's {SCHEDULER_PLUGINS_SCHEDULER!r} (the default), Volcano's with 'volcano', none with ''",
            ),
        ] = None,
        pending_timeout: Annotated[
            float | None,
            typer.Option(
                metavar="SECONDS",
                help="a job whose pod stays Pending longer than this gets a Pending condition naming why "
                "(Unschedulable, ImagePullBackOff, ...); 0 turns it off (default 300)",
            ),
        ] = None,
        service_account_max_token_expiration: Annotated[
            int | None,
            typer.Option(
                metavar="SECONDS",
                help="the longest life of a service-account token (the pods' projected tokens, which the node "
                f"refreshes at 80% of their life), as kube-apiserver's flag (default ${tokenlife.MAX_EXPIRATION_ENV} "
                "or as each pod asks)",
            ),
        ] = None,
        node_name: Annotated[
            str | None, typer.Option(help="name of the local Node (default: this host's name)", rich_help_panel=NODE)
        ] = None,
        cpus: Annotated[
            str | None,
            typer.Option(
                metavar="N", help="declare N CPUs (e.g. 8 or 1500m) instead of detecting", rich_help_panel=NODE
            ),
        ] = None,
        memory: Annotated[
            str | None, typer.Option(metavar="QTY", help="declare this much memory (e.g. 64Gi)", rich_help_panel=NODE)
        ] = None,
        gpus: Annotated[
            int | None,
            typer.Option(metavar="N", help="declare N nvidia.com/gpu (default: counted)", rich_help_panel=NODE),
        ] = None,
        max_pods: Annotated[
            int | None, typer.Option(metavar="N", help="pods it runs at once (default 110)", rich_help_panel=NODE)
        ] = None,
        container_log_max_size: Annotated[
            str | None,
            typer.Option(
                metavar="QTY",
                help="rotate a container's log before it grows past this size, as the kubelet's containerLogMaxSize "
                f"(default ${containerlogs.SIZE_ENV} or 10Mi)",
                rich_help_panel=NODE,
            ),
        ] = None,
        container_log_max_files: Annotated[
            int | None,
            typer.Option(
                metavar="N",
                help="log files kept per container, the current one and N-1 rotated, as the kubelet's "
                f"containerLogMaxFiles (at least 2; default ${containerlogs.FILES_ENV} or 5)",
                rich_help_panel=NODE,
            ),
        ] = None,
        taint: Annotated[
            list[str] | None,
            typer.Option(
                metavar="KEY[=VALUE]:EFFECT",
                help="taint the node (repeatable); set at every start, replacing the node's taints",
                rich_help_panel=NODE,
            ),
        ] = None,
        nodes: Annotated[
            int | None,
            typer.Option(
                metavar="N",
                help="run N nodes alike (node-1 ... node-N, or <node-name>-1 ...), each with the capacity and taints "
                "the flags above give it (default 1)",
                rich_help_panel=NODE,
            ),
        ] = None,
        nodes_file: Annotated[
            Path | None,
            typer.Option(
                metavar="FILE",
                help="run the nodes this YAML file describes: `nodes: [{name, capacity: {cpu, memory, "
                "nvidia.com/gpu, pods}, labels: {...}, taints: [KEY[=VALUE]:EFFECT, ...]}]` (docs/nodes.md)",
                rich_help_panel=NODE,
            ),
        ] = None,
        node_lease_duration: Annotated[
            int | None,
            typer.Option(
                metavar="SECONDS",
                help="each node's Lease duration, renewed every quarter of it, as the kubelet's "
                "nodeLeaseDurationSeconds (default 40)",
                rich_help_panel=NODE,
            ),
        ] = None,
        cluster_dns: Annotated[
            str | None,
            typer.Option(
                metavar="ADDRESS",
                help="the loopback address the cluster DNS listens on (port 53; it needs root or "
                "CAP_NET_BIND_SERVICE), which pods' resolv.conf names, as the kubelet's clusterDNS: 'auto' (the "
                "default) derives one from --port, 'none' turns it off",
                rich_help_panel=NODE,
            ),
        ] = None,
        node_monitor_grace_period: failureflags.GracePeriod = None,
        default_not_ready_toleration_seconds: failureflags.NotReadySeconds = None,
        default_unreachable_toleration_seconds: failureflags.UnreachableSeconds = None,
        metric_resolution: autoscalingflags.Resolution = None,
        horizontal_pod_autoscaler_sync_period: autoscalingflags.SyncPeriod = None,
        horizontal_pod_autoscaler_downscale_stabilization: autoscalingflags.Downscale = None,
    ) -> None:
        options = UpOptions(
            port=port,
            foreground=foreground,
            operator=operator,
            secure=secure,
            workspace=workspace,
            restart_backoff=restart_backoff,
            gang_scheduler_name=gang_scheduler_name,
            pending_timeout=pending_timeout,
            service_account_max_token_expiration=service_account_max_token_expiration,
            node=NodeFlags(
                node_name=node_name,
                cpus=cpus,
                memory=memory,
                gpus=gpus,
                max_pods=max_pods,
                taint=tuple(taint or ()),
                nodes=nodes,
                nodes_file=nodes_file,
                node_lease_duration=node_lease_duration,
                cluster_dns=cluster_dns,
            ),
            container_log_max_size=container_log_max_size,
            container_log_max_files=container_log_max_files,
            failure=(
                node_monitor_grace_period,
                default_not_ready_toleration_seconds,
                default_unreachable_toleration_seconds,
            ),
            autoscaling=(
                metric_resolution,
                horizontal_pod_autoscaler_sync_period,
                horizontal_pod_autoscaler_downscale_stabilization,
            ),
        )
        raise typer.Exit(cmd_up(GLOBALS.layout, options))

    @app.command(help="Stop the control plane and every training process it runs (also those a killed plane left).")
    def down() -> None:
        raise typer.Exit(cmd_down(GLOBALS.layout))

    @app.command(help="Say what runs where.")
    def status() -> None:
        raise typer.Exit(planestatus.cmd_status(GLOBALS.layout, running(GLOBALS.layout)))

    @app.command(help="Print the path of the kubeconfig for kubectl.")
    def kubeconfig() -> None:
        raise typer.Exit(cmd_kubeconfig(GLOBALS.layout))


NODE = (
    "Local node (declared capacity is a simulation: the scheduler admits pods against it, while their processes "
    "still share this machine's CPUs, memory and GPUs)"
)


@dataclass(frozen=True)
class UpOptions:
    """``yard up``'s options (its flags' help says what each means); None: not given."""

    port: int
    foreground: bool
    operator: bool
    secure: bool | None
    workspace: Path | None
    restart_backoff: float | None
    gang_scheduler_name: str | None
    pending_timeout: float | None
    service_account_max_token_expiration: int | None
    node: NodeFlags
    container_log_max_size: str | None
    container_log_max_files: int | None
    failure: tuple[str | None, int | None, int | None] = (None, None, None)  # ``failureflags.FAILURE_ENVS``' flags
    autoscaling: tuple[str | None, str | None, str | None] = (None, None, None)  # ``autoscalingflags.ENVS``' flags


def _alive(pid: int) -> bool:
    """Whether the plane's process runs. Not a zombie: a plane started by ``yard up`` is init's child,
    and an init that reaps late (seen in containers: 1.5 s) kept ``yard down`` waiting on it."""
    from trainyard.cluster.clients.node.runtime.shim import alive

    return alive(pid, None)


def running(layout: Layout) -> dict[str, Any] | None:
    """The state of a live plane under this home, or None (stale files are cleaned up)."""
    try:
        state = json.loads(layout.state_file.read_text())
    except (FileNotFoundError, ValueError):
        return None
    if not _alive(int(state.get("pid", 0))) or not _healthy(state["url"], layout):
        return None
    return dict(state)


def _healthy(url: str, layout: Layout) -> bool:
    try:
        context = ssl.create_default_context(cafile=layout.ca_cert) if url.startswith("https:") else None
        with urllib.request.urlopen(f"{url}/healthz", timeout=2, context=context) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def cmd_up(layout: Layout, args: UpOptions) -> int:
    state = running(layout)
    if state is not None:
        print(f"trainyard is already running at {state['url']} (pid {state['pid']}, home {layout.home})")
        if args.secure is not None and bool(state.get("secure")) != args.secure:
            flag = "--secure" if args.secure else "--insecure"
            print(f"error: it is not serving as {flag} asks; run `yard down` first to switch", file=sys.stderr)
            return 1
        if args.node.argv():
            node = ", ".join(f"{k}={v}" for k, v in (state.get("capacity") or {}).items())
            print(
                f"note: node flags apply when the plane starts; node {state.get('node')!r} runs with {node} "
                "(run `yard down` first to change it)",
                file=sys.stderr,
            )
        return 0
    try:
        nodeflags.specs(layout, args.node)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.restart_backoff is not None:
        # The plane (a child process when in the background) reads it from its environment.
        os.environ[backoff.ENV] = repr(args.restart_backoff)
    if args.service_account_max_token_expiration is not None:
        os.environ[tokenlife.MAX_EXPIRATION_ENV] = str(args.service_account_max_token_expiration)
    # Read by the plane from its environment too, as the back-off.
    for env, value in (
        (containerlogs.SIZE_ENV, args.container_log_max_size),
        (containerlogs.FILES_ENV, args.container_log_max_files),
        *zip(failureflags.FAILURE_ENVS, args.failure, strict=True),
        *zip(autoscalingflags.ENVS, args.autoscaling, strict=True),
    ):
        if value is not None:
            os.environ[env] = str(value)
    try:
        backoff.from_env()
        tokenlife.max_expiration()
        containerlogs.from_env()
        failureflags.check_env()
        autoscalingflags.check_env()
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.pending_timeout is not None and not args.pending_timeout >= 0:
        print(
            f"error: --pending-timeout must be 0 (off) or a positive number of seconds, not {args.pending_timeout!r}",
            file=sys.stderr,
        )
        return 2
    # Everything the plane (and this command) creates under the home is the owner's alone.
    os.umask(PRIVATE_UMASK)
    try:
        narrowed = make_private(layout.home)
        secure, migrated = serving_mode(layout, args.secure)
        save_mode(layout, secure)
    except SharedHomeError as exc:
        print(f"error: {exc}; set $TRAINYARD_HOME or --home to a directory of your own", file=sys.stderr)
        return 2
    except OSError as exc:  # a full disk, most often: the plane needs room for its store and logs
        print(
            f"error: cannot write in {layout.home}: {exc.strerror or exc}; free space on the disk that holds it "
            "(or choose another home with $TRAINYARD_HOME or --home) and run `yard up` again",
            file=sys.stderr,
        )
        return 1
    if narrowed:
        print(f"note: made {layout.home} and what is in it private to you (0700/0600)", file=sys.stderr)
    if migrated:
        print(
            f"note: this plane served plain http, the old default; it now serves HTTPS with a bearer token "
            f"(secure by default). The kubeconfig {layout.kubeconfig} changed: copies of the old one stop "
            "working, read it again (KUBECONFIG=$(yard kubeconfig)). To keep plain http: `yard down && "
            "yard up --insecure`.",
            file=sys.stderr,
        )
    if not secure and not args.foreground:  # the foreground plane logs it (to stderr) as it starts
        print(insecure_warning(args.port), file=sys.stderr)
    workspace = (args.workspace or Path.cwd()).resolve()
    if args.foreground:
        return _foreground(layout, args, workspace, secure)
    return _background(layout, args, workspace, secure)


def serving_mode(layout: Layout, flag: bool | None) -> tuple[bool, bool]:
    """(secure, migrated): the flag if given, else what this home's last ``yard up`` chose.

    Plain http is kept only where the user opted in (``"insecureOptIn": true``, written by
    ``--insecure`` since plain http stopped being the default). A ``yard.json`` that says plain http
    without it was written by an older ``yard up`` whose default that was: it moves to the secure
    default (``migrated``) and the caller says so.
    """
    if flag is not None:
        return flag, False
    try:
        settings = json.loads(layout.settings_file.read_text())
    except (FileNotFoundError, ValueError):
        return True, False
    if not isinstance(settings, dict) or settings.get("secure", True) is not False:
        return True, False
    if settings.get("insecureOptIn") is True:
        return False, False
    return True, True


def save_mode(layout: Layout, secure: bool) -> None:
    settings: dict[str, Any] = {"secure": True} if secure else {"secure": False, "insecureOptIn": True}
    layout.settings_file.write_text(json.dumps(settings) + "\n")  # 0600: under PRIVATE_UMASK


def insecure_warning(port: int) -> str:
    return (
        f"WARNING: `--insecure`: the API server on http://127.0.0.1:{port} has no TLS and no authentication. Any "
        "local user or process can use it: read and change every object, and run any command, with hostPath "
        "volumes reading and writing any file, as the user who started the plane. Go back to the secure default "
        "(HTTPS and a bearer token in the 0600 kubeconfig) with `yard down && yard up --secure`."
    )


def _foreground(layout: Layout, args: UpOptions, workspace: Path, secure: bool) -> int:
    from trainyard.embedded import EmbeddedPlane, PlaneOptions

    port = args.port
    specs = nodeflags.specs(layout, args.node)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    if not secure:
        logging.getLogger("trainyard").warning("%s", insecure_warning(port))
    layout.pid_file.write_text(str(os.getpid()))
    try:
        options = PlaneOptions(
            home=layout.home,
            port=port,
            workspace=workspace,
            secure=secure,
            nodes=specs,
            node_lease_seconds=args.node.node_lease_duration or DEFAULT_LEASE_SECONDS,
            cluster_dns=args.node.cluster_dns or "auto",
            operator=args.operator,
            pending_timeout=args.pending_timeout,
            gang_scheduler_name=(
                SCHEDULER_PLUGINS_SCHEDULER if args.gang_scheduler_name is None else args.gang_scheduler_name
            ),
        )
        asyncio.run(EmbeddedPlane(options).serve_forever())
    except OSError as exc:
        logging.getLogger("trainyard").error(
            "cannot start the API server on 127.0.0.1:%s: %s; stop whatever uses it or choose another port with "
            "`yard up --port N`",
            port,
            exc.strerror or exc,
        )
        return 1
    finally:
        with contextlib.suppress(FileNotFoundError):
            layout.pid_file.unlink()
    return 0


def _background(layout: Layout, args: UpOptions, workspace: Path, secure: bool) -> int:
    port = args.port
    argv = [
        sys.executable,
        "-m",
        "trainyard.cli.main",
        "--home",
        str(layout.home),
        "up",
        "--foreground",
        "--port",
        str(port),
        "--workspace",
        str(workspace),
        "--secure" if secure else "--insecure",
        *args.node.argv(),
        *([] if args.operator else ["--no-operator"]),
        *([] if args.gang_scheduler_name is None else ["--gang-scheduler-name", args.gang_scheduler_name]),
    ]
    if args.pending_timeout is not None:
        argv += ["--pending-timeout", repr(args.pending_timeout)]
    with layout.log_file.open("ab") as log_file:
        child = subprocess.Popen(
            argv,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=workspace,
        )
    print(f"starting the trainyard control plane (pid {child.pid}, log {layout.log_file}) ...", flush=True)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        state = running(layout)
        if state is not None and state.get("pid") == child.pid:
            print(f"trainyard control plane running at {state['url']}")
            print(
                f"  kubectl:   export KUBECONFIG={layout.kubeconfig}"
                "   (or: KUBECONFIG=$(yard kubeconfig) kubectl get pods)"
            )
            print("  stop with: yard down")
            return 0
        if child.poll() is not None:
            break
        time.sleep(0.2)
    print("the control plane did not start; the end of its log says why:", file=sys.stderr)
    print(_tail(layout.log_file, 15), file=sys.stderr)
    if child.poll() is None:
        child.terminate()
    return 1


def _tail(path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def cmd_down(layout: Layout) -> int:
    try:
        pid = int(layout.pid_file.read_text())
    except (FileNotFoundError, ValueError):
        print("trainyard is not running")
        _stop_leftovers(layout)
        return 0
    if not _alive(pid):
        layout.pid_file.unlink(missing_ok=True)
        layout.state_file.unlink(missing_ok=True)
        print("trainyard is not running (removed a stale pid file)")
        _stop_leftovers(layout)
        return 0
    print(f"stopping trainyard (pid {pid}) and its training processes ...", flush=True)
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
    if _alive(pid):
        print(f"still running after {STOP_TIMEOUT:.0f}s; killing it", file=sys.stderr)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    layout.pid_file.unlink(missing_ok=True)
    layout.state_file.unlink(missing_ok=True)
    _stop_leftovers(layout)
    print("stopped")
    return 0


def _stop_leftovers(layout: Layout) -> None:
    """Stop containers that outlived their control plane (it was killed): `yard down` stops everything."""
    from trainyard.cluster.clients.node.runtime import shims

    stopped = shims.stop_all(layout.home / "pods", LEFTOVER_GRACE)
    if stopped:
        print(f"stopped {stopped} container(s) left running by a control plane that was killed")


def cmd_kubeconfig(layout: Layout) -> int:
    print(layout.kubeconfig)
    return 0
