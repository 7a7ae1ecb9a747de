"""Why a job is where it is, in plain language: Pending, Restarting and Failed jobs explained,
with ``yard doctor``'s findings (``sdk.diagnosis``) where it has some.

Pure: it reads a job, its pods and their events (as the API returned them) and says what a
person would after reading ``kubectl describe`` on each of them. ``None`` when there is nothing
to explain (a job that is running or done).
"""

from __future__ import annotations

from collections.abc import Sequence

from trainyard.api.jobview import JobView
from trainyard.api.meta import Obj
from trainyard.sdk.diagnosis.model import Finding
from trainyard.sdk.jobstate import condition, container_state, finished, replica_name, state, true_conditions

# Waiting reasons of a container that mean the pod cannot start until someone changes something.
_STUCK_HINTS = {
    "Unschedulable": "no node can take it; lower the job's resource requests or free the node "
    "(`yard status` shows the node's capacity)",
    "ImagePullBackOff": "its image cannot be pulled; check the image name (the local plane ignores images, "
    "so this comes from a real cluster)",
    "ErrImagePull": "its image cannot be pulled; check the image name",
    "CreateContainerConfigError": "its container cannot be configured; a ConfigMap or Secret it references "
    "is probably missing",
    "CrashLoopBackOff": "its container keeps crashing and is waiting before the next restart",
    "RunContainerError": "its command could not be started; check the command and working directory",
}


def _pod_line(pod: Obj, container: str | None) -> str | None:
    """One sentence about a pod that is not running, or None if it runs."""
    cs = container_state(pod, container)
    who = f"{replica_name(pod)} ({pod['metadata']['name']})"
    if cs.phase in ("Running", "Succeeded") and not cs.reason:
        return None
    if cs.reason in _STUCK_HINTS:
        detail = f": {cs.message}" if cs.message else ""
        return f"{who} is {cs.reason}{detail} — {_STUCK_HINTS[cs.reason]}."
    if cs.phase == "Pending" and cs.reason in ("", "ContainerCreating", "PodInitializing"):
        return f"{who} is starting ({cs.reason or 'not started yet'})."
    if cs.phase == "Failed" or cs.exit_code not in (None, 0):
        return f"{who} {_exit_words(cs.exit_code, cs.reason)}."
    if cs.reason:
        return f"{who} is {cs.phase}, {cs.reason}{': ' + cs.message if cs.message else ''}."
    return None


def _exit_words(code: int | None, reason: str) -> str:
    if code is None:
        return f"ended ({reason or 'no exit code'})"
    if code == 137 or reason == "OOMKilled":
        return f"was killed (exit code {code}{', ' + reason if reason else ''}: out of memory or SIGKILL)"
    if code == 143:
        return "was terminated (exit code 143, SIGTERM)"
    return f"exited with code {code}{' (' + reason + ')' if reason and reason != 'Error' else ''}"


def _restart_lines(pods: list[Obj], container: str | None) -> list[str]:
    out = []
    for pod in pods:
        cs = container_state(pod, container)
        if cs.restarts:
            last = _exit_words(cs.last_exit_code, cs.last_reason) if cs.last_exit_code is not None else "failed"
            out.append(f"{replica_name(pod)} restarted {cs.restarts} time(s); last time it {last}.")
        elif cs.phase == "Failed" or cs.exit_code not in (None, 0):
            out.append(f"{replica_name(pod)} {_exit_words(cs.exit_code, cs.reason)}.")
    return out


def _backoff_line(job: Obj) -> str | None:
    run_policy = (job.get("spec") or {}).get("runPolicy") or {}
    limit = run_policy.get("backoffLimit")
    count = (job.get("status") or {}).get("restartCount")
    if limit is None:
        return None
    used = f"{count} of " if count is not None else ""
    return f"Restarts so far: {used}backoffLimit {limit}; past the limit the job fails."


def _warning_events(events: list[Obj], said: list[str], limit: int = 3) -> list[str]:
    """The latest distinct warnings that add something to what ``said`` already says."""
    warnings = [e for e in events if e.get("type") == "Warning" and not any(e.get("message", "") in s for s in said)]
    seen: list[str] = []
    for e in reversed(warnings):
        line = f"{(e.get('involvedObject') or {}).get('name', '?')}: {e.get('reason', '')}: {e.get('message', '')}"
        if line not in seen:
            seen.append(line)
        if len(seen) == limit:
            break
    return [f"Recent warning: {line}" for line in reversed(seen)]


def why(
    job: Obj,
    pods: list[Obj],
    events: list[Obj],
    *,
    view: JobView,
    container: str | None = None,
    findings: Sequence[Finding] = (),
) -> list[str] | None:
    """Plain-language reasons a job is Pending, Restarting or Failed; None when it needs none.

    ``view`` is the job's family's (``api.jobview``): its success word, STATE and the fields named.
    ``findings`` (``sdk.diagnosis``: ``yard doctor``'s) say what is wrong and what to do: they
    stand in for this module's own line about each pod they explain, and are said after the job's
    state (also for a job that runs, or waits suspended in a queue).
    """
    covered = {name for f in findings for name in f.pods}
    told = [line for f in findings for line in f.lines()]
    lines, warn = _state_lines(job, pods, view, container, covered)
    if (
        findings
        and lines[:1]
        and lines[0].startswith("The job is suspended")
        and any(f.rule == "QueueWait" for f in findings)
    ):
        lines = []  # suspended by Kueue until admitted: the queue's finding says why
    if not lines and not told:
        return None
    lines += told
    return lines + _warning_events(events, lines) if warn or told else lines


def _state_lines(
    job: Obj, all_pods: list[Obj], view: JobView, container: str | None, covered: set[str]
) -> tuple[list[str], bool]:
    """The lines about the job's state and its pods (but those ``covered``), and whether recent warnings follow."""
    pods = [p for p in all_pods if p["metadata"]["name"] not in covered]
    current = state(job, view)
    true = true_conditions(job)
    done = finished(job, view)
    if done == view.succeeded:
        return [], False
    if done == view.failed:
        failed = condition(job, view.failed) or {}
        lines = [f"The job failed: {failed.get('message') or failed.get('reason') or 'no message'}"]
        message = str(failed.get("message") or "")
        if "backoff limit" in message:
            lines.append(
                f"Its replicas failed more often than {view.backoff_field} allows; fix the crash "
                "(see `yard logs`) or raise backoffLimit."
            )
        elif "deadline" in message:
            lines.append(f"It ran longer than {view.deadline_field} ({view.deadline(job)}s).")
        return lines + _restart_lines(pods, container), True
    if "Suspended" in true:
        return [f"The job is suspended ({view.suspend_field}: true); it runs no pods until that is cleared."], False
    if current == "Restarting" or "Restarting" in true:
        restarting = condition(job, "Restarting") or {}
        lines = [f"The job is restarting: {restarting.get('message') or 'a replica failed'}"]
        lines += _restart_lines(pods, container)
        backoff = _backoff_line(job)
        if backoff:
            lines.append(backoff)
        return lines, True
    if current == "Pending" or "Pending" in true or not view.is_running(job):
        lines = []
        pending = condition(job, "Pending")
        if pending and pending.get("status") == "True":
            lines.append(f"The job is Pending ({pending.get('reason')}): {pending.get('message', '')}")
        if not all_pods:
            if not view.handled(job):
                lines.append(
                    "No operator has handled the job yet: is one running? (`yard up` runs one; "
                    "`yard up --no-operator` needs `yard operator`)."
                )
            else:
                lines.append("The operator has created no pods for it yet (gang scheduling may be waiting).")
        else:
            lines += [line for pod in pods if (line := _pod_line(pod, container))]
        return lines, bool(lines)
    return [], False
