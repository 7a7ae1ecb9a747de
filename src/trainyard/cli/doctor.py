"""``yard doctor JOB``: what is wrong with a job and what to do, from its pods, events, logs and the plane.

The findings are ``sdk.diagnosis``'s (gathered by ``sdk.doctor``), the same ``yard describe``
shows under Why. The exit status is 1 when there is any finding, so scripts can test a job;
``-o json`` gives the findings to tools.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.text import Text

from trainyard.cli.common import api, fail, handled, out
from trainyard.cli.lookup import find_job, split_target
from trainyard.sdk import doctor, jobstate
from trainyard.sdk.diagnosis import Settings, diagnose

_STYLES = {"error": "red", "warning": "yellow"}


def register(app: typer.Typer) -> None:
    @app.command("doctor", help="Say what is wrong with a job and what to do (exit 1 when something is).")
    @handled
    def doctor_command(
        target: Annotated[str, typer.Argument(help="KIND/NAME | <kind> NAME | NAME")],
        name: Annotated[str | None, typer.Argument(help="the job's name")] = None,
        namespace: Annotated[str | None, typer.Option("-n", "--namespace", help="namespace")] = None,
        output: Annotated[str, typer.Option("-o", "--output", help="text or json")] = "text",
        grace: Annotated[
            float, typer.Option(help="seconds pods may run on after training reported 100% before it is a finding")
        ] = Settings.finished_grace_seconds,
        tail: Annotated[int, typer.Option(help="log lines quoted per container")] = Settings.log_lines,
    ) -> None:
        if output not in ("text", "json"):
            fail(f"--output must be text or json, not {output!r}")
        client = api(namespace)
        kind_word, job_name = split_target(target, name)
        kind, job = find_job(client, kind_word, job_name, client.namespace)
        snap = doctor.gather(client, kind, job, settings=Settings(finished_grace_seconds=grace, log_lines=tail))
        findings = diagnose(snap)
        what = f"{kind.singular}/{snap.name}"
        current = jobstate.state(job, kind.view)
        if output == "json":
            body = {
                "job": {"kind": kind.kind, "name": snap.name, "namespace": snap.namespace, "state": current},
                "findings": [f.to_dict() for f in findings],
            }
            typer.echo(json.dumps(body, indent=2))
        elif not findings:
            out.print(Text(f"{what} ({current}): no problem found"))
        else:
            out.print(Text(f"{what} ({current}): {len(findings)} problem(s) found"))
            for finding in findings:
                out.print()
                out.print(Text(f"{finding.severity.upper()} {finding.rule}", style=_STYLES[finding.severity]))
                for line in finding.lines():
                    out.print(Text(f"  {line}"))
        if findings:
            raise typer.Exit(1)
