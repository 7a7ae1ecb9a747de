"""A minimal HTTP/1.1 client for load generation: one keep-alive connection, one request at a time.

The benchmark's clients share a 2-core machine with the server, so a general-purpose client
(aiohttp's costs about as much CPU per request as the server) would measure mostly itself. This
one only writes a request and reads a ``Content-Length`` or chunked response, like wrk or hey.

``https://`` URLs are served over TLS, trusting the CA file in ``$RAWHTTP_CAFILE`` and sending
``Authorization: Bearer $RAWHTTP_TOKEN`` (a secure plane's ``pki/ca.crt`` and ``pki/token``), as
kubectl does with the plane's kubeconfig; environment variables so that the benchmark's client
processes inherit them.
"""

from __future__ import annotations

import asyncio
import functools
import os
import ssl
from collections.abc import AsyncIterator, Callable
from urllib.parse import urlsplit


def use_credentials(cafile: str, token: str) -> None:
    """Trust ``cafile`` and send ``token`` on ``https://`` URLs (in this process and the ones it starts)."""
    os.environ["RAWHTTP_CAFILE"], os.environ["RAWHTTP_TOKEN"] = cafile, token
    _context.cache_clear()


@functools.cache
def _context() -> ssl.SSLContext:
    return ssl.create_default_context(cafile=os.environ.get("RAWHTTP_CAFILE") or None)


def _tls(scheme: str) -> tuple[ssl.SSLContext | None, str]:
    """(the client TLS context or None, the extra header lines) for a URL's scheme."""
    if scheme != "https":
        return None, ""
    token = os.environ.get("RAWHTTP_TOKEN")
    return _context(), (f"Authorization: Bearer {token}\r\n" if token else "")


class HttpError(Exception):
    pass


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, auth: str = "") -> None:
        self.reader = reader
        self.writer = writer
        self.host = host
        self.auth = auth

    @classmethod
    async def open(cls, url: str) -> Connection:
        parts = urlsplit(url)
        context, auth = _tls(parts.scheme)
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port, limit=1 << 24, ssl=context)
        return cls(reader, writer, parts.netloc, auth)

    def close(self) -> None:
        self.writer.close()

    def send(self, method: str, path: str, body: bytes = b"", content_type: str = "application/json") -> None:
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nAccept: application/json\r\n{self.auth}"
        if body or method in ("POST", "PUT", "PATCH"):
            head += f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
        self.writer.write(head.encode() + b"\r\n" + body)

    async def request(
        self, method: str, path: str, body: bytes = b"", content_type: str = "application/json"
    ) -> tuple[int, bytes]:
        self.send(method, path, body, content_type)
        status, headers = await self._head()
        if headers.get("transfer-encoding") == "chunked":
            data = b"".join([chunk async for chunk in self._chunks()])
        else:
            data = await self.reader.readexactly(int(headers.get("content-length", "0")))
        return status, data

    async def stream(self, path: str) -> AsyncIterator[bytes]:
        """GET a chunked stream (a watch) and yield it line by line."""
        self.send("GET", path)
        status, _ = await self._head()
        if status != 200:
            raise HttpError(f"GET {path}: {status}")
        pending = b""
        async for chunk in self._chunks():
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                yield line

    async def _head(self) -> tuple[int, dict[str, str]]:
        raw = await self.reader.readuntil(b"\r\n\r\n")
        status_line, *lines = raw.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines:
            if line:
                key, _, value = line.partition(":")
                headers[key.strip().lower()] = value.strip()
        return int(status_line.split(" ", 2)[1]), headers

    async def _chunks(self) -> AsyncIterator[bytes]:
        while True:
            size = int((await self.reader.readuntil(b"\r\n"))[:-2].split(b";")[0], 16)
            data = await self.reader.readexactly(size + 2)
            if size == 0:
                return
            yield data[:-2]


class LineStream(asyncio.Protocol):
    """A watch read with callbacks instead of awaits: ``on_line`` gets each line as it arrives.

    Twenty watchers at 500 events/s are 10,000 lines a second for one process; parsing the
    chunked framing in ``data_received`` costs a fraction of a StreamReader's await per chunk.
    """

    def __init__(self, on_line: Callable[[bytes], None]) -> None:
        self.on_line = on_line
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._buffer = b""
        self._in_body = False
        self._chunk_left = 0
        self._partial = b""

    @classmethod
    async def open(cls, url: str, path: str, on_line: Callable[[bytes], None]) -> tuple[asyncio.Transport, LineStream]:
        parts = urlsplit(url)
        loop = asyncio.get_running_loop()
        context, auth = _tls(parts.scheme)
        transport, protocol = await loop.create_connection(
            lambda: cls(on_line), parts.hostname, parts.port, ssl=context
        )
        head = f"GET {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nAccept: application/json\r\n{auth}\r\n"
        transport.write(head.encode())
        return transport, protocol

    def data_received(self, data: bytes) -> None:
        if self.done.done():
            return  # the last chunk's trailer, or anything after it
        buf = self._buffer + data
        if not self._in_body:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                self._buffer = buf
                return
            if not buf.startswith(b"HTTP/1.1 200"):
                raise HttpError(buf[:end].decode("latin-1"))
            self._in_body, buf = True, buf[end + 4 :]
        pos = 0
        while True:
            if self._chunk_left == 0:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    break
                size = int(buf[pos:eol].split(b";")[0], 16)
                if size == 0:  # the last chunk
                    self._finish()
                    return
                pos, self._chunk_left = eol + 2, size + 2  # the data and its trailing CRLF
            take = min(self._chunk_left, len(buf) - pos)
            if take <= 0:
                break
            piece = buf[pos : pos + take]
            pos += take
            self._chunk_left -= take
            if self._chunk_left < 2:  # strip what of the trailing CRLF this piece holds
                piece = piece[: len(piece) - (2 - self._chunk_left)]
            self._feed(piece)
        self._buffer = buf[pos:]

    def _feed(self, piece: bytes) -> None:
        data = self._partial + piece
        *lines, self._partial = data.split(b"\n")
        for line in lines:
            self.on_line(line)

    def _finish(self) -> None:
        if not self.done.done():
            self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self._finish()
