"""``yard``'s own parsing: label selectors, --since, manifests (file, directory, stdin) and their errors."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import typer
import yaml
from lightkube.core.selector import build_selector

from trainyard.cli.get import parse_selector
from trainyard.cli.runs import Prefixes, parse_since
from trainyard.sdk.kinds import UnknownKindError, builtin_kinds, resolve
from trainyard.sdk.manifests import ManifestError, check, load

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("text", "selector"),
    [
        ("app=x", "app=x"),
        ("app==x,tier!=db", "app=x,tier!=db"),
        ("gpu,!spot", "gpu,!spot"),
        ("env in (a, b),zone notin (c)", "env in (a,b),zone notin (c)"),
    ],
)
def test_label_selectors_round_trip_to_the_query(text: str, selector: str) -> None:
    parsed = parse_selector(text)
    assert parsed is not None and build_selector(parsed) == selector


def test_since_durations() -> None:
    assert parse_since("90s") == 90
    assert parse_since("1h30m") == 5400
    assert parse_since("0s") == 1
    with pytest.raises(typer.BadParameter):
        parse_since("5 minutes")


def test_kind_words() -> None:
    kinds = builtin_kinds()
    assert [k.kind for k in resolve("ptj", kinds)] == ["PyTorchJob"]
    assert [k.kind for k in resolve("pytorchjobs.kubeflow.org", kinds)] == ["PyTorchJob"]
    assert resolve("jobs", kinds) == kinds
    assert [k.kind for k in resolve("tfjobs", kinds)] == ["TFJob"]
    assert [k.kind for k in resolve("trainjob", kinds)] == ["TrainJob"]  # a kind of a closed family (api.families)
    with pytest.raises(UnknownKindError, match="this cluster serves: pytorchjobs, tfjobs, xgboostjobs, paddlejobs"):
        resolve("jobsets", kinds)


def test_prefixes_align_and_keep_a_colour_per_replica() -> None:
    prefixes = Prefixes(["master-0", "worker-10"])
    assert prefixes.style("master-0") != prefixes.style("worker-10")
    assert prefixes.style("master-0") == prefixes.style("master-0")
    assert prefixes.width == len("worker-10")


JOB = "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata:\n  name: {name}\nspec: {{}}\n"


def test_a_directory_is_its_manifests_in_name_order(tmp_path: Path) -> None:
    (tmp_path / "b.yaml").write_text(JOB.format(name="second"))
    (tmp_path / "a.yml").write_text(JOB.format(name="first") + "---\n" + JOB.format(name="also"))
    (tmp_path / "notes.txt").write_text("not a manifest")
    docs = load(str(tmp_path))
    assert [d.body["metadata"]["name"] for d in docs] == ["first", "also", "second"]
    assert docs[1].source == f"{tmp_path / 'a.yml'} (document 2)"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: FooJob\napiVersion: x/v1\nmetadata: {name: a}\n", "job.yaml: kind: unknown kind 'FooJob'"),
        ("apiVersion: kubeflow.org/v1\nmetadata: {name: a}\n", "job.yaml: kind: Required value"),
        ("apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {}\n", "job.yaml: metadata.name: Required value"),
        (
            "apiVersion: kubeflow.org/v2\nkind: PyTorchJob\nmetadata: {name: a}\n",
            "job.yaml: apiVersion: 'kubeflow.org/v2'",
        ),
        ("- a\n- b\n", "job.yaml: a manifest is a mapping, not list"),
    ],
)
def test_document_errors_name_the_file_and_the_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    (doc,) = load(str(path))
    with pytest.raises(ManifestError) as caught:
        check(doc, builtin_kinds())
    assert str(caught.value).startswith(str(tmp_path / message))


def yard(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainyard.cli.main", *args],
        capture_output=True,
        text=True,
        input=stdin,
        cwd=REPO,
        timeout=60,
    )


def test_malformed_yaml_is_one_line_with_file_and_position_and_exit_1(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata:\n  name: [unclosed\n")
    result = yard("--home", str(tmp_path), "apply", "-f", str(bad))
    assert result.returncode == 1, result
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"error: {bad}:5:1: malformed YAML"), result.stderr
    stdin = yard("--home", str(tmp_path), "apply", "-f", "-", stdin="a: b: c\n")
    assert stdin.returncode == 1 and stdin.stderr.startswith("error: <stdin>:1:5: malformed YAML"), stdin.stderr


def test_a_missing_file_or_plane_is_one_line(tmp_path: Path) -> None:
    result = yard("--home", str(tmp_path), "apply", "-f", str(tmp_path / "nope.yaml"))
    assert result.returncode == 1 and result.stderr == f"error: {tmp_path / 'nope.yaml'}: No such file or directory\n"
    (tmp_path / "ok.yaml").write_text(JOB.format(name="a"))
    result = yard("--home", str(tmp_path), "get", "jobs")
    assert result.returncode == 1 and "start the control plane with `yard up`" in result.stderr
    assert "Traceback" not in result.stderr


def test_usage_errors_exit_2_and_completion_is_offered() -> None:
    assert yard("get").returncode == 2
    # Typer finds the shell among the process's ancestors (shellingham), as in a user's terminal; run
    # it from bash, not from whatever started pytest (make, an xdist worker, a CI agent without a shell).
    from_bash = ["bash", "-c", '"$@"; exit $?', "bash"]
    script = subprocess.run(
        [*from_bash, sys.executable, "-m", "trainyard.cli.main", "--show-completion", "bash"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert script.returncode == 0 and "_YARD_COMPLETE=complete_bash" in script.stdout
    env_words = subprocess.run(
        [sys.executable, "-m", "trainyard.cli.main"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        env={
            **__import__("os").environ,
            "_YARD_COMPLETE": "complete_bash",
            "COMP_WORDS": "yard get p",
            "COMP_CWORD": "2",
        },
    )
    assert env_words.stdout.split() == ["pods", "pytorchjobs", "ptj", "paddlejobs"], env_words


def test_an_unreachable_api_server_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(config))
    result = yard("--home", str(tmp_path), "get", "jobs")
    assert result.returncode == 1 and result.stderr.startswith("error: cannot reach the API server"), result.stderr
    assert result.stderr.count("\n") == 1
