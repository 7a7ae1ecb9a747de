"""``yard env``: the local Python environments that container images stand for on this machine.

A framework's packages (TensorFlow, PaddlePaddle, JAX, XGBoost) do not belong in trainyard's own
environment, nor with each other; each gets a venv of its own, recorded with the image globs it
stands for in ``$TRAINYARD_HOME/environments.yaml`` (``cluster.environments``), which the local
node reads at every container start.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from trainyard.cli.common import GLOBALS, UserError, fail, handled, table
from trainyard.cluster import environments
from trainyard.cluster.environments import Environment, EnvironmentsError
from trainyard.cluster.paths import SharedHomeError, make_private

NAME_HELP = "the environment's name (letters, digits, '-', '_', '.')"
IMAGE_HELP = "an image glob this environment stands for, e.g. 'tensorflow/tensorflow:*' (repeatable)"


def _file() -> Path:
    return GLOBALS.layout.environments_file


def _private_home() -> None:
    # `make envs` may write the home before any `yard up` made it: owner-only from the start, as `yard up` keeps it.
    try:
        make_private(GLOBALS.layout.home)
    except SharedHomeError as exc:
        raise UserError(str(exc)) from exc


def _check_name(name: str) -> None:
    if not name or not all(c.isalnum() or c in "-_." for c in name) or name.startswith("."):
        raise UserError(f"environment name {name!r} must be letters, digits, '-', '_' or '.', not starting with '.'")


def _check_images(images: list[str]) -> None:
    for glob in images:
        if not glob.strip() or any(c.isspace() for c in glob):
            raise UserError(f"--image {glob!r} is not an image glob (one like 'tensorflow/tensorflow:*', no spaces)")


def _record(name: str, path: Path, images: list[str]) -> None:
    _private_home()
    try:
        environments.record(_file(), Environment(name, path.resolve(), tuple(images)))
    except EnvironmentsError as exc:
        raise UserError(str(exc)) from exc
    globs = ", ".join(images) or "no images yet (add some with `yard env add NAME PATH --image GLOB`)"
    print(f"environment {name} at {path.resolve()} stands for: {globs}")


def register(app: typer.Typer) -> None:
    env_app = typer.Typer(
        help="Local Python environments that container images run in (images are not pulled here).",
        no_args_is_help=True,
    )
    app.add_typer(env_app, name="env")

    @env_app.command("create")
    @handled
    def create(
        name: Annotated[str, typer.Argument(help=NAME_HELP)],
        packages: Annotated[list[str] | None, typer.Argument(help="packages to install (pip specs)")] = None,
        requirement: Annotated[
            list[Path] | None, typer.Option("-r", "--requirement", help="a requirements file (repeatable)")
        ] = None,
        image: Annotated[list[str] | None, typer.Option("--image", help=IMAGE_HELP)] = None,
        path: Annotated[Path | None, typer.Option(help="where to create it (default: HOME/envs/NAME)")] = None,
        python: Annotated[str, typer.Option(help="the Python to base it on")] = sys.executable,
    ) -> None:
        """Create a venv, install packages into it (pip's progress shows), and record it with its image globs."""
        _check_name(name)
        _check_images(list(image or []))
        target = (path or GLOBALS.layout.environments_dir / name).resolve()
        for file in requirement or []:
            if not file.is_file():
                raise UserError(f"requirements file {file} does not exist")
        if not (target / "bin" / "python").exists():
            if shutil.which(python) is None:
                raise UserError(f"--python {python} is not a Python found here; give a path to a python3.11")
            _private_home()
            print(f"creating a venv at {target} from {python}", flush=True)
            if subprocess.run([python, "-m", "venv", str(target)]).returncode != 0:
                fail(f"{python} -m venv {target} failed (above); nothing was recorded")
        args = [arg for file in requirement or [] for arg in ("-r", str(file))] + list(packages or [])
        if args:
            print(f"installing into {target}: {' '.join(args)}", flush=True)
            pip = [str(target / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", *args]
            if subprocess.run(pip).returncode != 0:
                fail(f"pip could not install {' '.join(args)} into {target}; the environment was not recorded")
        _record(name, target, list(image or []))

    @env_app.command("add")
    @handled
    def add(
        name: Annotated[str, typer.Argument(help=NAME_HELP)],
        path: Annotated[Path, typer.Argument(help="an existing environment (a venv: PATH/bin/python)")],
        image: Annotated[list[str] | None, typer.Option("--image", help=IMAGE_HELP)] = None,
    ) -> None:
        """Record an existing environment (or replace the record of NAME) with the images it stands for."""
        _check_name(name)
        _check_images(list(image or []))
        if not (path / "bin" / "python").exists():
            raise UserError(f"{path} is not a Python environment ({path / 'bin' / 'python'} does not exist)")
        _record(name, path, list(image or []))

    @env_app.command("list")
    @handled
    def list_() -> None:
        """The recorded environments, in the order images are matched (the first match wins)."""
        try:
            entries = environments.load(_file()) if _file().exists() else []
        except EnvironmentsError as exc:
            raise UserError(str(exc)) from exc
        rows = [
            [e.name, str(e.path), ",".join(e.images) or "<none>", "yes" if e.exists else "MISSING"] for e in entries
        ]
        table(["NAME", "PATH", "IMAGES", "EXISTS"], rows)
        if not entries:
            print(f"(no environments in {_file()}: every image runs in trainyard's own environment)")

    @env_app.command("remove")
    @handled
    def remove(
        name: Annotated[str, typer.Argument(help=NAME_HELP)],
        delete: Annotated[bool, typer.Option("--delete", help="also delete the environment's directory")] = False,
    ) -> None:
        """Forget an environment: its images run in trainyard's own environment again."""
        try:
            entries = environments.load(_file()) if _file().exists() else []
            found = next((e for e in entries if e.name == name), None)
            if found is None:
                raise UserError(f"no environment named {name!r} in {_file()} (`yard env list` shows them)")
            # Only what `python -m venv` made: a mistyped path in the file must not cost a directory.
            if delete and found.path.exists() and not (found.path / "pyvenv.cfg").is_file():
                raise UserError(f"{found.path} is not a venv (no pyvenv.cfg): not deleted; remove it without --delete")
            environments.forget(_file(), name)
        except EnvironmentsError as exc:
            raise UserError(str(exc)) from exc
        if delete and found.path.exists():
            shutil.rmtree(found.path)
        print(f"environment {name} removed{f' and {found.path} deleted' if delete else ''}")
