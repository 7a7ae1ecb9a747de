"""``mountns``: mount points resolved in the container's root, and never made on the host."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trainyard.cluster.clients.node.runtime import mountns
from trainyard.cluster.clients.node.runtime.mountns import HOST, TMPFS, VOLUME, Root, resolve

# -- resolve: pure path work on a directory tree ------------------------------------------------------


def test_resolve_splits_what_exists_from_what_is_missing(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    assert resolve(tmp_path, "/etc/mpi/hostfile") == (tmp_path / "etc", ["mpi", "hostfile"])
    assert resolve(tmp_path, "/etc") == (tmp_path / "etc", [])
    assert resolve(tmp_path, "//etc/./x/../") == (tmp_path / "etc", [])


def test_resolve_follows_symlinks_inside_the_root(tmp_path: Path) -> None:
    (tmp_path / "usr" / "lib").mkdir(parents=True)
    (tmp_path / "lib").symlink_to("usr/lib")
    (tmp_path / "usr" / "lib" / "abs").symlink_to("/usr")
    (tmp_path / "usr" / "lib" / "up").symlink_to("../../../../..")
    assert resolve(tmp_path, "/lib/x") == (tmp_path / "usr" / "lib", ["x"])
    # An absolute target is the container's root, never the host's.
    assert resolve(tmp_path, "/lib/abs/lib") == (tmp_path / "usr" / "lib", [])
    # ``..`` stops at the root, as in a chroot.
    assert resolve(tmp_path, "/lib/up/usr/new") == (tmp_path / "usr", ["new"])


def test_resolve_refuses_a_symlink_loop(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    with pytest.raises(OSError, match="symbolic links"):
        resolve(tmp_path, "/a/x")


def test_resolve_refuses_dot_dot_through_a_missing_directory(tmp_path: Path) -> None:
    (tmp_path / "l").symlink_to("missing/../x")
    with pytest.raises(OSError, match="missing directory"):
        resolve(tmp_path, "/l")


def test_owner_is_the_nearest_mount_point(tmp_path: Path) -> None:
    root = Root(tmp_path)
    root.points |= {tmp_path / "etc": HOST, tmp_path / "data": VOLUME, tmp_path / "home": TMPFS}
    assert root.owner(tmp_path / "etc" / "ssh" / "x") == HOST
    assert root.owner(tmp_path / "data" / "sub") == VOLUME
    assert root.owner(tmp_path / "new") == TMPFS
    assert root.owner(tmp_path / "home") == TMPFS
    assert not root.writable(tmp_path / "etc")


# -- enter: in a real mount namespace (a child process; skipped where none can be made) ------------------


def _can_unshare() -> bool:
    probe = "from trainyard.cluster.clients.node.runtime import mountns; mountns.unshare(mountns.CLONE_NEWNS)"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0


needs_namespaces = pytest.mark.skipif(not _can_unshare(), reason="no mount namespace can be made here")


def _in_namespace(spec: dict[str, Any], body: str) -> Any:
    """Run ``body`` (it sets ``out``) after ``mountns.enter(spec)`` in a child; what it printed, as JSON."""
    code = (
        "import json, os, sys\nfrom pathlib import Path\nfrom trainyard.cluster.clients.node.runtime import mountns\n"
    )
    code += f"mountns.enter(json.loads({json.dumps(spec)!r}))\nout = None\n"
    code += f"{textwrap.dedent(body)}\nprint(json.dumps(out))\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def fresh() -> Iterator[str]:
    """A name no host directory has; removed afterwards should a test fail by making it."""
    name = f"trainyard-mountns-test-{uuid.uuid4().hex[:8]}"
    yield name
    for parent in ("/etc", "/home", "/usr"):
        if (Path(parent) / name).exists():
            subprocess.run(["rm", "-rf", str(Path(parent) / name)], check=False)


def _volume(tmp_path: Path, name: str, files: dict[str, str]) -> str:
    path = tmp_path / "volumes" / name
    path.mkdir(parents=True)
    for key, value in files.items():
        (path / key).write_text(value)
    return str(path)


@needs_namespaces
def test_a_mount_under_missing_host_directories_leaves_the_host_untouched(tmp_path: Path, fresh: str) -> None:
    ssh = _volume(tmp_path, "ssh", {"id_rsa": "key"})
    hostfile = _volume(tmp_path, "mpi", {"hostfile": "a slots=1\n"})
    spec = {
        "root": str(tmp_path / "root"),
        "cwd": "/",
        "mounts": [
            {"path": f"/etc/{fresh}", "source": hostfile, "readOnly": True},
            {"path": f"/home/{fresh}/.ssh", "source": ssh, "readOnly": True},
        ],
    }
    seen = _in_namespace(
        spec,
        f"""
        Path("/home/{fresh}/train.py").write_text("print(1)")
        out = {{
            "key": Path("/home/{fresh}/.ssh/id_rsa").read_text(),
            "hostfile": Path("/etc/{fresh}/hostfile").read_text(),
            "train": Path("/home/{fresh}/train.py").read_text(),
            "passwd": Path("/etc/passwd").read_text(),
            "etc": sorted(os.listdir("/etc")),
            "links": {{p.name: str(p.readlink()) for p in Path("/etc").iterdir() if p.is_symlink()}},
        }}
        """,
    )
    assert seen["key"] == "key"
    assert seen["hostfile"] == "a slots=1\n"
    assert seen["train"] == "print(1)"
    # The covered /etc still shows the host's entries, symlinks as symlinks.
    assert seen["passwd"] == Path("/etc/passwd").read_text()
    assert set(seen["etc"]) == {p.name for p in Path("/etc").iterdir()} | {fresh}
    assert seen["links"] == {p.name: str(p.readlink()) for p in Path("/etc").iterdir() if p.is_symlink()}
    assert not (Path("/etc") / fresh).exists()
    assert not (Path("/home") / fresh).exists()


@needs_namespaces
def test_nested_mounts_and_a_read_only_parent(tmp_path: Path, fresh: str) -> None:
    outer = _volume(tmp_path, "outer", {"a.txt": "outer"})
    inner = _volume(tmp_path, "inner", {"b.txt": "inner"})
    spec = {
        "root": str(tmp_path / "root"),
        "cwd": "/",
        "mounts": [
            {"path": f"/usr/{fresh}", "source": outer, "readOnly": True},
            {"path": f"/usr/{fresh}/nested/deeper", "source": inner},
        ],
    }
    seen = _in_namespace(
        spec,
        f"""
        base = Path("/usr/{fresh}")
        Path(base, "nested/deeper/new.txt").write_text("written")
        try:
            Path(base, "c.txt").write_text("no")
            writable = True
        except OSError:
            writable = False
        out = [Path(base, "a.txt").read_text(), Path(base, "nested/deeper/b.txt").read_text(), writable]
        """,
    )
    assert seen == ["outer", "inner", False]
    # The read-only volume got no mount point of its own; the writable inner one got the write.
    assert sorted(p.name for p in Path(outer).iterdir()) == ["a.txt"]
    assert sorted(p.name for p in Path(inner).iterdir()) == ["b.txt", "new.txt"]
    assert not (Path("/usr") / fresh).exists()


@needs_namespaces
def test_a_missing_directory_in_a_writable_volume_is_made_there(tmp_path: Path) -> None:
    data = _volume(tmp_path, "data", {})
    cache = _volume(tmp_path, "cache", {"c": "1"})
    spec = {
        "root": str(tmp_path / "root"),
        "cwd": "/",
        "mounts": [{"path": "/data", "source": data}, {"path": "/data/cache", "source": cache}],
    }
    assert _in_namespace(spec, 'out = Path("/data/cache/c").read_text()') == "1"
    assert (Path(data) / "cache").is_dir()


@needs_namespaces
def test_a_file_mount_at_a_missing_host_file_makes_no_file_on_the_host(tmp_path: Path, fresh: str) -> None:
    source = Path(_volume(tmp_path, "cm", {"conf": "x=1"})) / "conf"
    mounts = [{"path": f"/etc/{fresh}.conf", "source": str(source)}]
    spec = {"root": str(tmp_path / "root"), "cwd": "/", "mounts": mounts}
    assert _in_namespace(spec, f'out = Path("/etc/{fresh}.conf").read_text()') == "x=1"
    assert not Path(f"/etc/{fresh}.conf").exists()


@needs_namespaces
def test_a_joining_process_sees_what_the_container_wrote_outside_its_volumes(tmp_path: Path, fresh: str) -> None:
    ssh = _volume(tmp_path, "ssh", {"id_rsa": "key"})
    spec: dict[str, Any] = {
        "root": str(tmp_path / "root"),
        "cwd": "/",
        "mounts": [{"path": f"/home/{fresh}/.ssh", "source": ssh, "readOnly": True}],
    }
    script = f'open("/home/{fresh}/train.py", "w").write("shared"); print("ready", flush=True); input()'
    main = subprocess.Popen(
        [sys.executable, mountns.__file__, json.dumps(spec), "--", sys.executable, "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert main.stdout is not None and main.stdout.readline().strip() == "ready"
        joined = {**spec, "join": {"pid": main.pid, "start": mountns._start_ticks(main.pid)}}
        assert _in_namespace(joined, f'out = Path("/home/{fresh}/train.py").read_text()') == "shared"
        # A stale join (another process started at that pid) builds a namespace of its own instead.
        stale = {**spec, "join": {"pid": main.pid, "start": -1}}
        assert _in_namespace(stale, f'out = Path("/home/{fresh}/train.py").exists()') is False
    finally:
        assert main.stdin is not None
        main.stdin.close()
        main.wait(timeout=30)
    assert not (Path("/home") / fresh).exists()
