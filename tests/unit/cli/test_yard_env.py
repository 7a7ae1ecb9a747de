"""``yard env``: recording, listing and removing the environments images stand for, and what bad input says.

Creating one for real (a venv, pip) is the e2e test's (tests/e2e/test_image_environments.py).
"""

from __future__ import annotations

import stat
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from trainyard.cli.main import app

Yard = Callable[..., str]  # yard env ARGS... [code=N]: its output


def venv(tmp_path: Path, name: str) -> Path:
    (tmp_path / name / "bin").mkdir(parents=True)
    (tmp_path / name / "bin" / "python").touch()
    (tmp_path / name / "pyvenv.cfg").touch()
    return tmp_path / name


@pytest.fixture
def yard(tmp_path: Path) -> Yard:
    runner = CliRunner()

    def run(*args: str, code: int = 0) -> str:
        result = runner.invoke(app, ["--home", str(tmp_path / "home"), "env", *args])
        assert result.exit_code == code, result.output
        return result.output

    return run


def test_add_list_and_remove_keep_the_file_in_match_order(yard: Yard, tmp_path: Path) -> None:
    tf, anything = venv(tmp_path, "tf"), venv(tmp_path, "any")
    assert yard("add", "tf", str(tf), "--image", "tensorflow/tensorflow:*", "--image", "kubeflow/tf-*") == (
        f"environment tf at {tf} stands for: tensorflow/tensorflow:*, kubeflow/tf-*\n"
    )
    yard("add", "any", str(anything), "--image", "*")
    # `make envs` may be the first to write the home: owner-only, as `yard up` keeps it.
    assert stat.S_IMODE((tmp_path / "home").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "home" / "environments.yaml").stat().st_mode) == 0o600
    written = yaml.safe_load((tmp_path / "home" / "environments.yaml").read_text())
    assert written == {
        "environments": [
            {"name": "tf", "path": str(tf), "images": ["tensorflow/tensorflow:*", "kubeflow/tf-*"]},
            {"name": "any", "path": str(anything), "images": ["*"]},
        ]
    }
    (tf / "bin" / "python").unlink()
    rows = [line.split() for line in yard("list").splitlines()]
    assert rows == [
        ["NAME", "PATH", "IMAGES", "EXISTS"],
        ["tf", str(tf), "tensorflow/tensorflow:*,kubeflow/tf-*", "MISSING"],
        ["any", str(anything), "*", "yes"],
    ]
    assert yard("remove", "tf") == "environment tf removed\n"
    assert tf.exists()
    assert yard("remove", "any", "--delete") == f"environment any removed and {anything} deleted\n"
    assert not anything.exists()
    assert "every image runs in trainyard's own environment" in yard("list")


def test_add_again_replaces_the_entry_where_it_stands(yard: Yard, tmp_path: Path) -> None:
    a, b = venv(tmp_path, "a"), venv(tmp_path, "b")
    yard("add", "a", str(a), "--image", "x:*")
    yard("add", "b", str(b), "--image", "y:*")
    yard("add", "a", str(b), "--image", "z:*")
    rows = [line.split()[:3] for line in yard("list").splitlines()[1:]]
    assert rows == [["a", str(b), "z:*"], ["b", str(b), "y:*"]]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["add", ".hidden", "{env}", "--image", "x:*"], "environment name '.hidden' must be letters, digits"),
        (["add", "e", "{tmp}/nowhere", "--image", "x:*"], "{tmp}/nowhere is not a Python environment"),
        (["add", "e", "{env}", "--image", "a b"], "--image 'a b' is not an image glob"),
        (["remove", "nope"], "no environment named 'nope'"),
        (["create", "e", "-r", "{tmp}/missing.txt"], "requirements file {tmp}/missing.txt does not exist"),
        (["create", "e", "--python", "{tmp}/no-python"], "--python {tmp}/no-python is not a Python found here"),
    ],
)
def test_bad_input_says_what_to_do(yard: Yard, tmp_path: Path, args: list[str], words: str) -> None:
    env = venv(tmp_path, "env")
    filled = [a.format(env=env, tmp=tmp_path) for a in args]
    assert f"error: {words.format(tmp=tmp_path)}" in " ".join(yard(*filled, code=1).split())
    assert not (tmp_path / "home" / "envs").exists(), "nothing created on bad input"


def test_delete_refuses_what_is_not_a_venv(yard: Yard, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    (plain / "bin").mkdir(parents=True)
    (plain / "bin" / "python").touch()
    yard("add", "plain", str(plain), "--image", "x:*")
    assert "is not a venv (no pyvenv.cfg): not deleted" in yard("remove", "plain", "--delete", code=1)
    assert plain.exists() and "plain" in yard("list")


def test_a_broken_file_is_reported_not_overwritten(yard: Yard, tmp_path: Path) -> None:
    file = tmp_path / "home" / "environments.yaml"
    file.parent.mkdir()
    file.write_text("environments: [")
    assert "cannot be read" in yard("add", "e", str(venv(tmp_path, "e")), "--image", "x:*", code=1)
    assert "cannot be read" in yard("list", code=1)
    assert file.read_text() == "environments: ["
