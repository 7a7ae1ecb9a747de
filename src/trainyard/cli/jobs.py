"""``yard apply | get | describe | delete | wait``: kubectl's verbs for training jobs, over the SDK views.

Any job kind the cluster serves works (``sdk.kinds``); ``jobs`` means all of them. ``get`` and
``describe`` are modules of their own; this one registers the five verbs in kubectl's order.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text

from trainyard.cli import describe, get
from trainyard.cli.common import api, fail, handled, kinds_of, out
from trainyard.cli.lookup import NotFoundError, find_job, split_target
from trainyard.cli.progress import wait_for
from trainyard.sdk import manifests
from trainyard.sdk.kinds import default_kind

# Examples in help and messages: trainyard's default kind (the cluster may serve more).
EXAMPLE_KIND = default_kind().singular


def register(app: typer.Typer) -> None:
    @app.command(help="Create or update the jobs of manifest files, a directory of them, or - for stdin.")
    @handled
    def apply(
        filename: Annotated[
            list[str], typer.Option("-f", "--filename", help="a manifest file, a directory, or - (stdin); repeatable")
        ],
    ) -> None:
        # Every document is read and checked before the first is sent: a bad file changes nothing.
        docs = [doc for path in filename for doc in manifests.load(path)]
        client = api()
        kinds = kinds_of(client)
        checked = [(doc, manifests.check(doc, kinds)) for doc in docs]
        for doc, kind in checked:
            obj, outcome = manifests.apply(client, doc, kind, client.namespace)
            out.print(Text(f"{kind.singular}.{kind.group}/{obj['metadata']['name']} {outcome}"))

    get.register(app)
    describe.register(app)

    @app.command(help="Delete jobs (their pods and services go with them).")
    @handled
    def delete(
        target: Annotated[str, typer.Argument(help="<kind> | job | KIND/NAME")],
        names: Annotated[list[str] | None, typer.Argument(help="names of the jobs")] = None,
        ignore_not_found: Annotated[bool, typer.Option("--ignore-not-found", help="a missing job is no error")] = False,
        namespace: Annotated[str | None, typer.Option("-n", "--namespace", help="namespace")] = None,
    ) -> None:
        client = api(namespace)
        if "/" in target:
            kind_word, first = target.split("/", 1)
            wanted = [first, *(names or [])]
        else:
            kind_word, wanted = target, list(names or [])
        if not wanted:
            fail(f"name the job(s) to delete, e.g. `yard delete {EXAMPLE_KIND} NAME`")
        for job_name in wanted:
            try:
                kind, _ = find_job(client, kind_word, job_name, client.namespace)
            except NotFoundError as exc:
                if ignore_not_found:
                    continue
                fail(str(exc))
            client.delete(kind.resource, job_name, namespace=client.namespace)
            out.print(Text(f"{kind.singular}.{kind.group}/{job_name} deleted"))

    @app.command(help="Wait for a job to finish, showing its progress (exit 1 if it fails).")
    @handled
    def wait(
        target: Annotated[str, typer.Argument(help=f"KIND/NAME, e.g. {EXAMPLE_KIND}/pytorch-ddp")],
        timeout: Annotated[float, typer.Option(help="seconds")] = 600,
        namespace: Annotated[str | None, typer.Option("-n", "--namespace", help="namespace")] = None,
    ) -> None:
        client = api(namespace)
        kind_word, job_name = split_target(target, None)
        kind, _ = find_job(client, kind_word, job_name, client.namespace)
        raise typer.Exit(wait_for(client, kind, job_name, client.namespace, timeout=timeout))
