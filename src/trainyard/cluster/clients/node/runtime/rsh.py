"""The ssh stand-in a pod's processes run to reach another pod on this node: ``mpirun``'s launch agent.

``mpirun`` starts its remote daemons with ``AGENT [ssh options] HOST COMMAND...``; on this node no
sshd runs, so ``AGENT`` is this client (through the wrapper ``Layout.exec_agent``, which the node
agent writes as ``exec <trainyard's python> -I -S <this file> --socket <exec socket> "$@"``). It
parses ssh's command line as ssh does (``parse``), hands the node agent's exec server
(``node.podexec``) the target host, the command (its words joined by spaces, which the pod runs
through ``sh -c`` as sshd runs it through the user's shell) and its own stdin, stdout and stderr
(``SCM_RIGHTS``), then waits for the exit status and exits with it. Being killed or signalled
(SIGTERM, SIGINT, SIGHUP) closes the connection, and the agent then kills the remote command: as
when ssh dies, the remote side goes too.

As ssh: a host that is no pod of this node, a pod that is not running, or an exec socket that does
not answer is reported on stderr and the exit status is 255.

It runs under whatever Python the wrapper names with ``-I -S``: the standard library only.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import sys
from dataclasses import dataclass, field

# ssh's exit status for its own errors (as opposed to the remote command's).
SSH_ERROR = 255
# ssh options that take an argument (OpenSSH 9's ssh(1) synopsis); the others are flags.
WITH_ARGUMENT = frozenset("BbcDEeFIiJLlmOopQRSWw")
FLAGS = frozenset("46AaCfGgKkMNnqsTtVvXxYy")
_FRAME = struct.Struct("!I")
USAGE = (
    "usage: ssh [--socket PATH] [--container NAME] [-46AaCfGgKkMNnqsTtVvXxYy] [-o option] ... [user@]host [command ...]"
)


class UsageError(Exception):
    """The command line is not one ssh would accept."""


@dataclass
class Invocation:
    host: str
    command: list[str] = field(default_factory=list)
    user: str | None = None
    port: int | None = None
    # -o options, by lower-cased name (ssh's keywords are case-insensitive).
    options: dict[str, str] = field(default_factory=dict)
    no_stdin: bool = False
    quiet: bool = False
    socket: str | None = None
    container: str | None = None


def parse(argv: list[str]) -> Invocation:
    """ssh's command line (after our own ``--socket``/``--container``), as ssh reads it; ``UsageError`` if not."""
    args = list(argv)
    ours: dict[str, str] = {}
    while args and args[0].startswith("--") and args[0] != "--":
        name, eq, value = args.pop(0)[2:].partition("=")
        if name not in ("socket", "container"):
            raise UsageError(f"unknown option --{name}")
        if not eq:
            if not args:
                raise UsageError(f"option --{name} needs a value")
            value = args.pop(0)
        ours[name] = value
    found = Invocation(host="", socket=ours.get("socket"), container=ours.get("container"))
    while args and args[0].startswith("-") and args[0] != "-":
        word = args.pop(0)
        if word == "--":
            break
        letters = word[1:]
        while letters:
            letter, letters = letters[0], letters[1:]
            if letter in FLAGS:
                found.no_stdin |= letter == "n"
                found.quiet |= letter == "q"
                continue
            if letter not in WITH_ARGUMENT:
                raise UsageError(f"unknown option -- {letter}")
            if not letters:
                if not args:
                    raise UsageError(f"option requires an argument -- {letter}")
                letters = args.pop(0)
            _option(found, letter, letters)
            letters = ""
    if not args:
        raise UsageError("no host given")
    destination, found.command = args[0], args[1:]
    if destination.startswith("ssh://"):
        destination = destination.removeprefix("ssh://")
        destination, colon, port = destination.rpartition(":") if ":" in destination else (destination, "", "")
        if colon:
            found.port = _port(port)
    user, at, host = destination.rpartition("@")
    if at:
        found.user = user
    if not host:
        raise UsageError("no host given")
    found.host = host
    return found


def _option(found: Invocation, letter: str, value: str) -> None:
    if letter == "l":
        found.user = value
    elif letter == "p":
        found.port = _port(value)
    elif letter == "o":
        name, _, rest = value.replace("=", " ", 1).partition(" ")
        found.options[name.lower()] = rest.strip()
    # The rest (identity files, config files, forwardings, ciphers...) mean nothing between local pods.


def _port(value: str) -> int:
    if not value.isdigit() or not 0 < int(value) < 65536:
        raise UsageError(f"Bad port '{value}'")
    return int(value)


def command_line(words: list[str]) -> str | None:
    """What sshd runs: the command's words joined by single spaces (no quoting, as ssh sends them)."""
    return " ".join(words) if words else None


# -- talking to the node agent ---------------------------------------------------------------------


def _stdio(no_stdin: bool) -> list[int]:
    """The three descriptors the remote command gets: ours, with /dev/null for any that is closed (or -n)."""
    fds = []
    for fd in (0, 1, 2):
        usable = not (fd == 0 and no_stdin)
        if usable:
            try:
                os.fstat(fd)
            except OSError:
                usable = False
        fds.append(fd if usable else os.open(os.devnull, os.O_RDWR))
    return fds


def _fail(message: str) -> int:
    print(message, file=sys.stderr, flush=True)
    return SSH_ERROR


def run(found: Invocation) -> int:
    if not found.socket:
        return _fail("ssh: no exec socket given (--socket PATH): this client reaches pods only through a node agent")
    # No user: a pod's commands run as its containers do, whoever mpirun says to log in as.
    request = {"host": found.host, "command": command_line(found.command), "container": found.container}
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(found.socket)
    except OSError as exc:
        return _fail(f"ssh: connect to host {found.host}: the node agent's exec socket {found.socket}: {exc.strerror}")

    def hang_up(sig: int, _frame: object) -> None:
        # Closing the connection is what tells the node agent to kill the remote command.
        conn.close()
        os._exit(128 + sig)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, hang_up)
    body = json.dumps(request).encode()
    try:
        socket.send_fds(conn, [_FRAME.pack(len(body)) + body], _stdio(found.no_stdin))
        replies = conn.makefile("rb")
        for line in replies:
            reply = json.loads(line)
            if "error" in reply:
                print(reply["error"], file=sys.stderr, flush=True)
            if "exit" in reply:
                return int(reply["exit"])
    except (OSError, ValueError) as exc:
        return _fail(f"ssh: connection to {found.host} lost: {exc}")
    return _fail(f"Connection to {found.host} closed by the node agent.")


def main(argv: list[str]) -> int:
    try:
        found = parse(argv)
    except UsageError as exc:
        return _fail(f"ssh: {exc}\n{USAGE}")
    with contextlib.suppress(KeyboardInterrupt):
        return run(found)
    return 128 + signal.SIGINT


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
