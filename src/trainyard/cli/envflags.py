"""``yard up`` flags that reach the plane's process as environment variables: a refused value named by its flag."""

from __future__ import annotations

from collections.abc import Callable, Mapping


def check(flags: Mapping[str, str], *readers: Callable[[], object]) -> None:
    """Run each reader of the environment; its ValueError is raised again with each ``$VAR`` named
    as ``--flag ($VAR)`` (``flags``: variable → flag), so the user reads the flag they typed."""
    try:
        for read in readers:
            read()
    except ValueError as exc:
        text = str(exc)
        for env, flag in flags.items():
            text = text.replace(f"${env}", f"{flag} (${env})")
        raise ValueError(text) from None
