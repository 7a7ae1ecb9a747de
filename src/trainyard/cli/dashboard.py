"""``yard dashboard``: a one-time login link to the plane's dashboard, printed and opened."""

from __future__ import annotations

import os
import webbrowser
from pathlib import Path
from typing import Annotated

import typer

from trainyard.cli.common import GLOBALS, fail
from trainyard.dashboard.links import NoDashboard, login_link


def register(app: typer.Typer) -> None:
    @app.command(help="Print (and open in a browser) a one-time login link to the dashboard.")
    def dashboard(
        browser: Annotated[
            bool, typer.Option("--browser/--no-browser", help="open the link in this machine's browser, if it has one")
        ] = True,
    ) -> None:
        raise typer.Exit(cmd_dashboard(browser=browser))


def cmd_dashboard(*, browser: bool) -> int:
    layout = GLOBALS.layout
    kubeconfig = Path(GLOBALS.kubeconfig) if GLOBALS.kubeconfig else layout.kubeconfig
    if not kubeconfig.exists():
        fail(f"no kubeconfig at {kubeconfig}; start the control plane with `yard up` or pass --kubeconfig")
    try:
        link = login_link(kubeconfig)
    except NoDashboard as exc:
        fail(str(exc))
    print(link)
    print("The link works once, for 10 minutes; the session it opens lasts 7 days.")
    if not GLOBALS.kubeconfig and link.startswith("https:"):
        # The browser does not know the plane's own CA: it warns once, unless the CA is trusted.
        print(f"The page is served with the plane's certificate; trust its CA ({layout.ca_cert}) to avoid a warning.")
    if browser and _can_open():
        webbrowser.open(link)
    return 0


def _can_open() -> bool:
    """A browser this session could show: a display (or macOS/Windows), and not a CI run."""
    if os.environ.get("CI"):
        return False
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or os.name == "nt" or _macos()):
        return False
    try:
        webbrowser.get()
    except webbrowser.Error:
        return False
    return True


def _macos() -> bool:
    return os.uname().sysname == "Darwin" if hasattr(os, "uname") else False
