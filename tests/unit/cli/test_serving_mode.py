"""Which way a `yard up` serves (secure by default, plain http only by opt-in) and the home's permissions."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from trainyard.cli.plane import save_mode, serving_mode
from trainyard.cluster.paths import Layout, SharedHomeError, make_private


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (None, (True, False)),  # a new home
        ('{"secure": true}', (True, False)),
        ('{"secure": false, "insecureOptIn": true}', (False, False)),  # `--insecure`, remembered
        ('{"secure": false}', (True, True)),  # the old default: moved to https, and the user is told
        ("not json", (True, False)),
        ("[]", (True, False)),
    ],
)
def test_a_plain_yard_up_is_secure_unless_the_user_opted_in(
    tmp_path: Path, settings: str | None, expected: tuple[bool, bool]
) -> None:
    layout = Layout(tmp_path)
    if settings is not None:
        layout.settings_file.write_text(settings)
    assert serving_mode(layout, None) == expected
    assert serving_mode(layout, True) == (True, False)
    assert serving_mode(layout, False) == (False, False)


def test_the_opt_in_is_recorded_and_read_back(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    save_mode(layout, False)
    assert json.loads(layout.settings_file.read_text()) == {"secure": False, "insecureOptIn": True}
    assert serving_mode(layout, None) == (False, False)
    save_mode(layout, True)
    assert json.loads(layout.settings_file.read_text()) == {"secure": True}
    assert serving_mode(layout, None) == (True, False)


def test_make_private_creates_0700_and_narrows_an_old_home(tmp_path: Path) -> None:
    new = tmp_path / "a" / "home"
    assert make_private(new) == []
    assert mode(new) == 0o700

    old = tmp_path / "old"
    old.mkdir(mode=0o755)
    old.chmod(0o755)
    (old / "store.db").write_text("")
    (old / "store.db").chmod(0o644)
    (old / "pods").mkdir()
    (old / "pods").chmod(0o755)
    (old / "private").write_text("")
    (old / "private").chmod(0o600)
    assert sorted(make_private(old)) == [".", "pods", "store.db"]
    modes = (mode(old), mode(old / "store.db"), mode(old / "pods"), mode(old / "private"))
    assert modes == (0o700, 0o600, 0o700, 0o600)
    assert make_private(old) == []


def test_make_private_refuses_a_shared_directory(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    with pytest.raises(SharedHomeError, match="shared directory"):
        make_private(shared)
    assert mode(shared) == 0o1777
