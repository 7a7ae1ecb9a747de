"""README.md as a test: every ``$ `` line of its ``console`` blocks and every ``python`` block runs.

Convention (checked here, so the README cannot drift from it): shell commands live only in
```` ```console ```` blocks, one per line after a ``$ `` prompt (a trailing ``# comment`` is for the
reader); ```` ```python ```` blocks are whole programs. Other fences (yaml, text, ...) are not run,
and a fence that looks like a shell (``bash``, ``sh``, none) fails the test. Everything runs in
README order, as one terminal session would (exports and ``source`` carry over), against a plane
started with ``yard up`` in a temporary ``$TRAINYARD_HOME``; each must exit 0. A command that
cannot run here is named in ``NOT_RUN`` with the reason, and the test fails when that list names a
command the README no longer has.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO, Plane, own_plane

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]

README = REPO / "README.md"

SAME_AS_DEPLOY_BASE = (
    "needs a real cluster (a published image, a webhook certificate); tests/e2e/test_deploy_kubectl.py "
    "renders deploy/ with kubectl and applies to a plane what the plane serves"
)
NOT_RUN = {
    "make demo": "sets up .venv and starts the plane in ~/.trainyard; the test starts its own plane in a temporary "
    "home with `yard up` instead, which is what `make demo` does after installing",
    "make test": "runs the suite this test is part of",
    "docker build -f deploy/Dockerfile -t <registry>/training-operator:0.1.0 . && docker push "
    "<registry>/training-operator:0.1.0": "no Docker engine or registry here",
    "kubectl apply -k deploy/cert-manager": "needs a real cluster with cert-manager installed",
    "kubectl apply -k deploy/base": SAME_AS_DEPLOY_BASE,
    "kubectl apply -f deploy/trainyard.yaml": SAME_AS_DEPLOY_BASE,
    "yard up --no-operator": "would start a second plane in this home; tests/e2e/test_operator_process.py runs it",
    "yard operator": "runs in the foreground until stopped; tests/e2e/test_operator_process.py runs it",
    "yard --kubeconfig ~/.kube/config operator --leader-elect": "needs a real cluster",
}
# The venv running the tests is the one `make` installs (.venv of the checkout in a fresh clone).
REWRITES = {"source .venv/bin/activate": f"source {Path(sys.prefix) / 'bin' / 'activate'}"}
# What a command must print (stdout and stderr together) besides exiting 0, where that is the point of it.
EXPECT = {
    "yard run -f examples/pytorch-ddp/pytorchjob.yaml": ["final test_accuracy=", "Succeeded"],
    "yard get pytorchjobs": ["pytorch-ddp", "Succeeded"],
    "yard describe pytorchjob pytorch-ddp": ["Succeeded"],
    "yard logs pytorch-ddp --tail 3": ["[master-0]", "[worker-0]", "final test_accuracy="],
    "kubectl get pytorchjobs": ["pytorch-ddp", "Succeeded"],
    "kubectl logs pytorch-ddp-master-0 --tail 3": ["final test_accuracy="],
    "kubectl get events --field-selector involvedObject.name=pytorch-ddp": ["PyTorchJobSucceeded"],
    "python -m trainyard.operator --help": ["--leader-elect"],
    "make envs": ["environment tensorflow at", "environment paddle at"],
    "yard env list": ["ghcr.io/trainyard/examples-xgboost:*", "yes"],
    "yard env create scratch --image 'registry.example/me/scratch:*'": ["environment scratch at"],
    "PYTHONPATH=$VIRTUAL_ENV/clients/kubeflow python examples/trainjob/sdk_train.py": [
        "torch-distributed",
        "is Complete",
        "--- node-1",
        "rank 1 of 2: 750 training rows",
    ],
    "yard wait trainjob/trainjob-ddp": ["trainjob/trainjob-ddp succeeded"],
    "yard get trainjobs": ["RUNTIME", "NODES", "trainjob-ddp", "Complete", "torch-distributed"],
    "yard describe trainjob/trainjob-ddp": ["AllJobsCompleted", "node-1", "Jobs:"],
    "yard logs trainjob/trainjob-ddp | grep 'rank . of 2'": ["[node-0] rank 0 of 2", "[node-1] rank 1 of 2"],
    "kubectl get trainjobs,jobsets,jobs": ["trainjob-ddp-node-0"],
}
SHELL_FENCES = {"", "bash", "sh", "shell", "zsh", "console-session"}


@dataclass(frozen=True)
class Step:
    section: str
    line: int
    kind: str  # "shell" or "python"
    text: str

    @property
    def command(self) -> str:
        """The command without the reader's trailing comment: the key of NOT_RUN, REWRITES and EXPECT."""
        return re.sub(r"\s+#\s.*$", "", self.text).strip() if self.kind == "shell" else self.text


def readme_steps(text: str) -> Iterator[Step]:
    section = "(top)"
    fence: str | None = None
    start = 0
    body: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        if fence is None:
            if line.startswith("#"):
                section = line.lstrip("#").strip()
            elif line.startswith("```"):
                fence, start, body = line[3:].strip(), number, []
                if fence in SHELL_FENCES:
                    raise AssertionError(
                        f"README.md:{number}: a ```{fence} block; put commands in ```console blocks after `$ ` "
                        "so this test runs them"
                    )
            continue
        if line.startswith("```"):
            if fence == "python":
                yield Step(section, start, "python", "\n".join(body) + "\n")
            fence = None
        elif fence == "console":
            if not line.startswith("$ ") or line.rstrip().endswith("\\"):
                raise AssertionError(f"README.md:{number}: console lines are one `$ ` command each: {line!r}")
            yield Step(section, number, "shell", line[2:])
        else:
            body.append(line)
    assert fence is None, f"README.md:{start}: unclosed ``` block"


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    yield from own_plane(tmp_path_factory, "readme")


def test_readme_convention_and_not_run_list() -> None:
    steps = list(readme_steps(README.read_text()))
    commands = {s.command for s in steps}
    assert not set(NOT_RUN) - commands, f"NOT_RUN names commands the README no longer has: {set(NOT_RUN) - commands}"
    assert not set(EXPECT) - commands, f"EXPECT names commands the README no longer has: {set(EXPECT) - commands}"
    assert not set(REWRITES) - commands, f"REWRITES names commands the README no longer has: {set(REWRITES) - commands}"
    # The README's promise: set-up is these two commands, first.
    assert [s.command for s in steps[:2]] == ["make demo", "make test"]
    assert any(s.kind == "python" for s in steps)


def test_every_readme_command_runs(plane: Plane, tmp_path: Path) -> None:
    state = tmp_path / "shell-state.sh"
    # One terminal session: `export` and `source` in one command are seen by the next.
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env.update(TRAINYARD_HOME=str(plane.home), KUBECACHEDIR=str(tmp_path / "kube-cache"))
    state.write_text("")
    ran = 0
    for step in readme_steps(README.read_text()):
        if step.command in NOT_RUN:
            continue
        if step.kind == "python":
            program = tmp_path / f"readme_line_{step.line}.py"
            program.write_text(step.text)
            command = f"python {program}"
        else:
            command = REWRITES.get(step.command, step.text)
        script = f"source {state}\n{command}\nrc=$?\nexport -p > {state}\nexit $rc\n"
        result = subprocess.run(
            ["bash", "-c", script],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            stdin=subprocess.DEVNULL,
        )
        where = f"README.md:{step.line} ({step.section}): {step.command if step.kind == 'shell' else 'python block'}"
        output = result.stdout + result.stderr
        assert result.returncode == 0, f"{where} exited {result.returncode}:\n{output[-4000:]}"
        for expected in EXPECT.get(step.command, []):
            assert expected in output, f"{where} did not print {expected!r}:\n{output[-4000:]}"
        if step.kind == "python" and "hello-ddp" in step.text:
            assert "hello from rank" in output, f"{where} printed no replica's greeting:\n{output[-4000:]}"
        ran += 1
    assert ran >= 15, f"only {ran} README commands ran"
