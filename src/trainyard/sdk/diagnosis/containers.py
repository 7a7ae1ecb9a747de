"""Rules about containers that ended badly: OOM-killed, a command that is not there, an image whose
Python environment lacks what the code imports (or is not there), a configuration the node cannot
set up, and, for whatever else exits non-zero, the crash itself with its exit code and last log lines.

They read what the node writes (``OOMKilled`` with the memory used and the limit, ``StartError``
with the exec error, the ``Pulled`` event that names the environment an image ran in) and what the
container printed (``ModuleNotFoundError``, ``command not found``).
"""

from __future__ import annotations

import re

from trainyard.api.meta import Obj
from trainyard.sdk.diagnosis.model import (
    Finding,
    Snapshot,
    all_log_lines,
    container_spec,
    event_line,
    events_about,
    field_path,
    log_tail,
    main_container,
    pod_name,
    quoted,
    state_of,
    unexplained,
    who,
)


def _ended(snap: Snapshot, pod: Obj) -> tuple[int | None, str, str, bool]:
    """(exit code, reason, message, whether it is the previous run) of the main container's last end."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    name = main_container(snap, pod)
    cs = next((c for c in statuses if c.get("name") == name), statuses[0] if statuses else {})
    now = (cs.get("state") or {}).get("terminated")
    if now:
        return now.get("exitCode"), str(now.get("reason") or ""), str(now.get("message") or ""), False
    last = (cs.get("lastState") or {}).get("terminated")
    if last:
        return last.get("exitCode"), str(last.get("reason") or ""), str(last.get("message") or ""), True
    return None, "", "", False


def _limit(pod: Obj, snap: Snapshot) -> str | None:
    limit = ((container_spec(snap, pod).get("resources") or {}).get("limits") or {}).get("memory")
    return str(limit) if limit else None


_OOM_USED = re.compile(r"used ([\d.]+\s*\w+), over its memory limit resources\.limits\.memory=(\S+?);?\s")


def oom(snap: Snapshot, claimed: frozenset[str]) -> list[Finding]:
    out = []
    for pod in unexplained(snap, claimed):
        code, reason, message, previous = _ended(snap, pod)
        events = events_about(snap, pod_name(pod), "OOMKilled")
        if reason != "OOMKilled" and not events:
            continue
        told = message or (str(events[-1].get("message", "")) if events else "")
        found = _OOM_USED.search(told + " ")
        limit = found.group(2) if found else _limit(pod, snap)
        peak = f"peak {found.group(1)}" if found else "its peak is not known"
        evidence = [f"{pod_name(pod)}: {'lastState' if previous else 'state'}.terminated OOMKilled, exit code {code}"]
        evidence += [event_line(e) for e in events[-1:]]
        path = field_path(snap, pod, "resources.limits.memory")
        above = f" above {found.group(1)}" if found else ""
        out.append(
            Finding(
                "OOMKilled",
                "error",
                f"{who(pod)} was OOM-killed: {peak}, over its memory limit {limit or '(none set: the node ran out)'}.",
                f"raise resources.limits.memory{above} ({path}: {limit or 'unset'}), or make the step use less "
                "(a smaller batch, fewer data-loader workers)",
                tuple(evidence),
                (pod_name(pod),),
            )
        )
    return out


_NO_MODULE = re.compile(r"(?:ModuleNotFoundError|ImportError): No module named '([^']+)'")
_OWN_ENV = re.compile(r'Container image "([^"]*)" runs in trainyard\'s own environment \(([^)]*)\)')
_LOCAL_ENV = re.compile(r'Container image "([^"]*)" runs in local environment "([^"]+)" \(([^)]*)\)')


def environment(snap: Snapshot, claimed: frozenset[str]) -> list[Finding]:
    """The image's local environment lacks what the code imports, or the mapping names one that is not there."""
    out = []
    for pod in unexplained(snap, claimed):
        name = pod_name(pod)
        code, reason, message, _ = _ended(snap, pod)
        cs = state_of(snap, pod)
        refused = next((m for m in (message, cs.message) if "maps to local environment" in m), "")
        if refused:
            cause, _, remedy = refused.partition("; ")
            out.append(
                Finding(
                    "EnvironmentMissing",
                    "error",
                    f"{who(pod)} cannot start: {cause}.",
                    remedy or "create the environment (`yard env create`) or remove the entry (`yard env remove`)",
                    (f"{name}: {cs.reason or reason}: {refused}",),
                    (name,),
                )
            )
            continue
        if code in (None, 0):
            continue
        hits = [(w, line, m) for w, line in all_log_lines(snap, pod) if (m := _NO_MODULE.search(line))]
        if not hits:
            continue
        where, said_line, found = hits[-1]
        missing = (where, said_line)
        module = found.group(1)
        pulled = [str(e.get("message", "")) for e in events_about(snap, name, "Pulled")]
        own = next((m for p in reversed(pulled) if (m := _OWN_ENV.search(p))), None)
        local = next((m for p in reversed(pulled) if (m := _LOCAL_ENV.search(p))), None)
        evidence = [f"{name} {missing[0]}: {missing[1].rstrip()}"]
        top = module.split(".")[0]
        if own is not None:
            image = own.group(1)
            glob = image.rsplit(":", 1)[0] + ":*" if ":" in image.rsplit("/", 1)[-1] else image
            evidence.append(f"event Pulled on pod/{name}: {own.group(0)}")
            cause = (
                f"{who(pod)} exited with code {code}: image {image} maps to no local environment, so it ran in "
                f"trainyard's own ({own.group(2)}), which has no module {top!r}."
            )
            remedy = (
                f"give the image an environment with its packages: `yard env create NAME {top} --image '{glob}'` "
                f"(or `yard env add NAME PATH --image '{glob}'` for a venv you have), then recreate the job"
            )
        elif local is not None:
            evidence.append(f"event Pulled on pod/{name}: {local.group(0)}")
            cause = (
                f"{who(pod)} exited with code {code}: local environment {local.group(2)!r} (for image "
                f"{local.group(1)}) has no module {top!r}."
            )
            remedy = f"install it there (`{local.group(3)}/bin/python -m pip install {top}`), then recreate the job"
        else:
            cause = f"{who(pod)} exited with code {code}: its Python environment has no module {top!r}."
            remedy = f"install {top} into the environment the image runs in (`yard env list`), or fix the import"
        out.append(Finding("ModuleNotFound", "error", cause, remedy, tuple(evidence), (name,)))
    return out


def command(snap: Snapshot, claimed: frozenset[str]) -> list[Finding]:
    """The container's command is not there (exit 127, or the node's ``StartError``) or not executable (126)."""
    out = []
    for pod in unexplained(snap, claimed):
        name = pod_name(pod)
        code, reason, message, _ = _ended(snap, pod)
        lines, where = log_tail(snap, pod)
        if reason == "StartError" and ("No such file or directory" in message or "not found" in message):
            said = f"{name}: StartError (exit code {code}): {message}"
        elif code == 127:
            said = next((f"{name} {where}: {line.rstrip()}" for line in reversed(lines) if "not found" in line), "")
            said = said or f"{name}: exit code 127 (command not found)"
        elif code == 126:
            said = f"{name}: exit code 126 (found but not executable)"
        else:
            continue
        path = field_path(snap, pod, "command")
        out.append(
            Finding(
                "CommandNotFound",
                "error",
                f"{who(pod)} could not run its command: {message or said.split(': ', 1)[-1]}.",
                f"fix {path}: the local node runs it in the image's environment (`yard env list`) or trainyard's, "
                "with the workspace as working directory; install the program there or give its full path",
                (said,),
                (name,),
            )
        )
    return out


def config(snap: Snapshot, claimed: frozenset[str]) -> list[Finding]:
    """The node cannot set the container up: a missing ConfigMap or Secret, a volume that will not mount."""
    out = []
    for pod in unexplained(snap, claimed):
        name = pod_name(pod)
        cs = state_of(snap, pod)
        mounts = [e for e in events_about(snap, name, "FailedMount") if e.get("type") == "Warning"]
        if not (cs.reason == "CreateContainerConfigError" or (cs.phase == "Pending" and mounts)):
            continue
        told = cs.message or (str(mounts[-1].get("message", "")) if mounts else "")
        out.append(
            Finding(
                "ContainerConfig",
                "error",
                f"{who(pod)} cannot be set up: {told}",
                "create what it references (the ConfigMap, Secret or claim named) or fix the pod template",
                tuple([f"{name}: {cs.reason or 'Pending'}", *(event_line(e) for e in mounts[-1:])]),
                (name,),
            )
        )
    return out


def image_pull(snap: Snapshot, claimed: frozenset[str]) -> list[Finding]:
    """A real cluster's kubelet cannot pull the image (the local node pulls none: it maps images to environments)."""
    out = []
    for pod in unexplained(snap, claimed):
        cs = state_of(snap, pod)
        if cs.reason not in ("ImagePullBackOff", "ErrImagePull", "InvalidImageName"):
            continue
        image = next(
            (
                c.get("image")
                for c in (pod.get("spec") or {}).get("containers") or []
                if c.get("name") == main_container(snap, pod)
            ),
            "?",
        )
        out.append(
            Finding(
                "ImagePull",
                "error",
                f"{who(pod)} cannot start: its image {image} cannot be pulled ({cs.reason}).",
                f"check the image's name and tag ({field_path(snap, pod, 'image')}) and that the registry lets the "
                "node pull it (imagePullSecrets); `kubectl describe pod` shows the kubelet's words",
                (f"{pod_name(pod)}: {cs.reason}: {cs.message}",),
                (pod_name(pod),),
            )
        )
    return out


_SIGNALS = {
    137: "killed by SIGKILL (the node's grace period ran out, a liveness probe, or memory)",
    143: "terminated by SIGTERM",
    139: "a segmentation fault (SIGSEGV)",
    134: "aborted (SIGABRT)",
}


def _restarts(snap: Snapshot, pod: Obj) -> tuple[int, str]:
    """How often the replica ran again: in place (the container's restartCount) or as a whole gang."""
    cs = state_of(snap, pod)
    if cs.restarts:
        return cs.restarts, f"restarted {cs.restarts} time(s) in place"
    count = int((snap.job.get("status") or {}).get("restartCount") or 0)
    if count:
        return count, f"the job restarted its replicas {count} time(s)"
    return 0, "not restarted"


def crash(snap: Snapshot, claimed: frozenset[str]) -> list[Finding]:
    """Whatever else exits non-zero: the exit code, restarts and the last lines it printed."""
    out = []
    limit = ((snap.job.get("spec") or {}).get("runPolicy") or {}).get("backoffLimit")
    for pod in unexplained(snap, claimed):
        name = pod_name(pod)
        code, reason, message, previous = _ended(snap, pod)
        cs = state_of(snap, pod)
        if code in (None, 0) and cs.reason != "CrashLoopBackOff":
            continue
        count, restarted = _restarts(snap, pod)
        meaning = _SIGNALS.get(code or 0, "")
        how = f"exit code {code}" + (f" ({reason})" if reason and reason != "Error" else "")
        how += f", {meaning}" if meaning else ""
        lines, where = log_tail(snap, pod, previous_first=previous)
        looping = cs.reason == "CrashLoopBackOff" or count > 0
        # Restarted in place and running again (an elastic worker that recovered): said, but not a failure.
        recovered = previous and cs.phase == "Running" and not cs.reason
        evidence = [f"{name}: {how}; {restarted}" + (f" (CrashLoopBackOff: {cs.message})" if cs.message else "")]
        evidence += quoted(snap, pod, lines, where)
        events = [e for e in events_about(snap, snap.name) if e.get("type") == "Warning"][-1:]
        evidence += [event_line(e) for e in events]
        error = next((line.strip() for line in reversed(lines) if re.match(r"\s*[\w.]+(Error|Exception)\b", line)), "")
        said = f": {error}" if error else (f": {message}" if message else "")
        budget = f" (backoffLimit {limit})" if limit is not None else ""
        verb = "restarted after it failed" if recovered else "keeps crashing" if looping else "failed"
        out.append(
            Finding(
                "Restarted" if recovered else "CrashLoop" if looping else "ContainerFailed",
                "warning" if recovered else "error",
                f"{who(pod)} {verb}: {how}{said}.",
                f"read its log (`kubectl logs {name}{' --previous' if previous else ''}`, `yard logs {snap.name}`), "
                f"fix the code or its input, then recreate the job; restarts{budget} will not fix a bug",
                tuple(evidence),
                (name,),
            )
        )
    return out
