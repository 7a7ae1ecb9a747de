"""Port-forward over SPDY streams as kubectl drives it: error and data stream pairs, a pod's real port."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from spdy_peer import Peer, StreamWire, serving
from trainyard.cluster.server.apiserver import errors
from trainyard.cluster.server.apiserver.tunnels import portforward
from trainyard.cluster.server.apiserver.tunnels.forwarding import PodTarget
from trainyard.cluster.server.apiserver.tunnels.spdy import frames

TARGET = PodTarget("default", "web", "0f3c-uid")


def headers(kind: str, port: int | str, request_id: str | None = "0") -> dict[str, list[str]]:
    # as client-go sets them (http.Header canonical names), before the Go framer lower-cases them
    found = {"Streamtype": [kind], "Port": [str(port)]}
    if request_id is not None:
        found["Requestid"] = [request_id]
    return {k.lower(): v for k, v in found.items()}


@contextlib.asynccontextmanager
async def pod_port(
    answer: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
) -> AsyncIterator[int]:
    """A process listening on a loopback port, as a pod's server does in host network mode."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await answer(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


async def shout_until_eof(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write((await reader.read()).upper())
    await writer.drain()


def closed_port() -> int:
    async def find() -> int:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port: int = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        return port

    return asyncio.run(find())


def forward(client: Callable[[Peer], Awaitable[None]], *, timeout: float = portforward.STREAM_CREATION_TIMEOUT) -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        pairs = portforward.StreamPairs(TARGET, timeout=timeout)
        session = portforward.Session(StreamWire(reader, writer), pairs.accept)
        try:
            await session.serve()
        finally:
            await pairs.stop()

    async def go() -> None:
        async with serving(serve) as peer:
            await client(peer)

    asyncio.run(go())


def test_a_connection_is_forwarded_to_the_pods_port_and_both_streams_end() -> None:
    async def client(peer: Peer) -> None:
        async with pod_port(shout_until_eof) as port:
            await peer.open(1, headers("error", port))
            await peer.send(frames.Data(1, b"", fin=True))  # kubectl does not write to the error stream
            await peer.open(3, headers("data", port))
            await peer.send(frames.Data(3, b"get / http/1.0"), frames.Data(3, b"", fin=True))
            assert await peer.read_stream(3) == (b"GET / HTTP/1.0", None)
            assert await peer.read_stream(1) == (b"", None)  # no error

    forward(client)


def test_a_port_nothing_listens_on_gets_the_kubelets_error_on_the_error_stream() -> None:
    port = closed_port()

    async def client(peer: Peer) -> None:
        await peer.open(1, headers("error", port))
        await peer.open(3, headers("data", port))
        message, end = await peer.read_stream(1)
        assert end is None
        text = message.decode()
        assert text.startswith(
            f"error forwarding port {port} to pod 0f3c-uid, uid : failed to connect to localhost:{port} inside the "
            f"pod's network (the node's, in host network mode), IPv4: dial tcp4 127.0.0.1:{port}: connect: "
            f"connection refused IPv6 dial tcp6 [::1]:{port}: connect: "  # refused, or no IPv6 on the machine
        ), text
        assert await peer.read_stream(3) == (b"", None)

    forward(client)


@pytest.mark.parametrize(
    ("sent", "why"),
    [
        ({"streamtype": ["data"]}, "port header is required"),
        ({"streamtype": ["data"], "port": ["http"]}, "unable to parse http as a port"),
        ({"streamtype": ["data"], "port": ["0"]}, "port 0 must be > 0"),
        ({"port": ["80"]}, "streamType header is required"),
        ({"port": ["80"], "streamtype": ["stdin"]}, "invalid stream type stdin"),
    ],
    ids=["no-port", "named-port", "port-zero", "no-type", "bad-type"],
)
def test_streams_without_a_valid_port_and_type_are_reset(sent: dict[str, list[str]], why: str) -> None:
    class Nowhere:
        async def receive(self) -> bytes:
            return b""

        async def send(self, data: bytes) -> None:
            return None

    pairs = portforward.StreamPairs(TARGET)
    stream = portforward.Stream(portforward.Session(Nowhere(), pairs.accept), 1, sent, remote_done=False)
    assert why in (pairs.accept(stream) or "").replace('"', "")

    async def client(peer: Peer) -> None:
        await peer.send(frames.SynStream(1, sent))
        assert await peer.next() == frames.RstStream(1, frames.Rst.CANCEL)

    forward(client)


def test_two_connections_are_forwarded_side_by_side() -> None:
    async def client(peer: Peer) -> None:
        async with pod_port(shout_until_eof) as port:
            await peer.open(1, headers("error", port, "0"))
            await peer.open(3, headers("error", port, "1"))
            await peer.open(5, headers("data", port, "1"))
            await peer.open(7, headers("data", port, "0"))
            await peer.send(frames.Data(5, b"one", fin=True), frames.Data(7, b"zero", fin=True))
            answers = {}
            while len(answers) < 2:
                frame = await peer.next()
                if isinstance(frame, frames.Data) and frame.data:
                    answers[frame.stream_id] = frame.data
            assert answers == {5: b"ONE", 7: b"ZERO"}

    forward(client)


def test_streams_of_clients_without_request_ids_pair_by_stream_id() -> None:
    async def client(peer: Peer) -> None:
        async with pod_port(shout_until_eof) as port:
            await peer.open(1, headers("error", port, None))
            await peer.open(3, headers("data", port, None))
            await peer.send(frames.Data(3, b"old", fin=True))
            assert await peer.read_stream(3) == (b"OLD", None)

    forward(client)


def test_a_stream_whose_pair_never_comes_times_out_with_the_kubelets_words() -> None:
    async def client(peer: Peer) -> None:
        await peer.open(1, headers("error", 80, "9"))
        message, end = await peer.read_stream(1)
        assert "request=9) timed out waiting for streams" in message.decode() and end is None

    forward(client, timeout=0.2)


def test_a_second_error_stream_for_one_request_is_reported_on_the_first() -> None:
    async def client(peer: Peer) -> None:
        await peer.open(1, headers("error", 80, "4"))
        await peer.open(3, headers("error", 80, "4"))
        frame = await peer.next()
        assert frame == frames.Data(1, b"error processing stream for request 4: error stream already assigned")

    forward(client)


def test_a_reset_data_stream_closes_the_pods_connection() -> None:
    async def client(peer: Peer) -> None:
        closed = asyncio.Event()

        async def keep_open(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read()  # a keep-alive server: it ends only when the forwarder hangs up
            closed.set()

        async with pod_port(keep_open) as port:
            await peer.open(1, headers("error", port))
            await peer.open(3, headers("data", port))
            await peer.send(frames.Data(3, b"x"), frames.RstStream(3, frames.Rst.CANCEL))
            await asyncio.wait_for(closed.wait(), 30)

    forward(client)


def test_a_pod_not_bound_to_a_node_has_no_ports_to_forward() -> None:
    pod = {"metadata": {"name": "web", "namespace": "default", "uid": "u"}, "spec": {}}
    with pytest.raises(errors.ApiError, match="pod web does not have a host assigned"):
        portforward.target(pod)
    assert portforward.target({**pod, "spec": {"nodeName": "vm"}}) == PodTarget("default", "web", "u")
