"""The cluster's DNS server, as CoreDNS is to a cluster: answers the cluster domain from informers, forwards the rest.

Pods whose ``dnsPolicy`` asks for cluster DNS get a ``resolv.conf`` naming this server
(``node.dnsconfig``), so ``getent hosts <job>-master-0``, ``nslookup`` and every resolver inside a
pod find a job's replicas by their Service names. It listens on UDP and TCP port 53 of one
loopback address (resolv.conf has no port field): each plane takes its own address (``address_for``),
so several planes on one machine never collide. Names under the cluster domain are answered from
what the Services and pods informers hold (``records``), authoritatively; any other name is
forwarded to the machine's own nameservers (CoreDNS's ``forward . /etc/resolv.conf``) and their
answer relayed, SERVFAIL when none answers.

Binding port 53 needs root or ``CAP_NET_BIND_SERVICE``; ``start`` raises ``OSError`` otherwise, and
the plane runs without cluster DNS (pods keep the machine's resolv.conf) and says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, cast

import dns.asyncquery
import dns.exception
import dns.flags
import dns.message
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset

from trainyard.api.meta import Obj
from trainyard.cluster.clients.dns import records
from trainyard.cluster.tasks import cancel_all
from trainyard.kit.informer import Informer

log = logging.getLogger(__name__)

PORT = 53
NAMESPACE_INDEX = "dns-namespace"
FORWARD_TIMEOUT = 2.0
_LENGTH = struct.Struct("!H")
_MAX_TCP_MESSAGE = 65535


def address_for(api_port: int) -> str:
    """The loopback address a plane's DNS listens on: ``127.53.<port high byte>.<port low byte>``."""
    return f"127.53.{api_port >> 8}.{api_port & 0xFF}"


def host_nameservers(resolv_conf: str) -> list[str]:
    """The ``nameserver`` lines of the machine's resolv.conf text."""
    out = []
    for line in resolv_conf.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] == "nameserver":
            out.append(fields[1])
    return out


def by_namespace(obj: Obj) -> list[str]:
    return [str((obj.get("metadata") or {}).get("namespace") or "")]


class ClusterDns:
    def __init__(
        self,
        address: str,
        services: Informer,
        pods: Informer,
        *,
        domain: str = records.DEFAULT_DOMAIN,
        upstream: list[str] | None = None,
        port: int = PORT,
    ) -> None:
        self.address, self.port, self.domain = address, port, domain
        self.services, self.pods = services, pods
        pods.add_indexers({NAMESPACE_INDEX: by_namespace})
        if upstream is None:
            with contextlib.suppress(OSError):
                upstream = host_nameservers(Path("/etc/resolv.conf").read_text())
        self.upstream = [ns for ns in upstream or [] if ns != address]
        self._udp: asyncio.DatagramTransport | None = None
        self._tcp: asyncio.Server | None = None
        self._work: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Listen on ``address``:53, UDP and TCP; ``OSError`` when the port cannot be bound."""
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(lambda: _Udp(self), local_addr=(self.address, self.port))
        self._udp = transport
        try:
            self._tcp = await asyncio.start_server(self._serve_tcp, self.address, self.port)
        except OSError:
            transport.close()
            raise
        log.info("cluster DNS on %s:%d for %s", self.address, self.port, self.domain)

    async def close(self) -> None:
        if self._udp is not None:
            self._udp.close()
        if self._tcp is not None:
            self._tcp.close()
            await self._tcp.wait_closed()
        await cancel_all(self._work)

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._work.add(task)
        task.add_done_callback(self._work.discard)

    async def answer(self, wire: bytes) -> bytes | None:
        """The response to one query message; None when it cannot be read as one (dropped, as CoreDNS does)."""
        try:
            query = dns.message.from_wire(wire)
        except dns.exception.DNSException:
            return None
        if len(query.question) != 1:
            return _refusal(query, dns.rcode.FORMERR)
        question = query.question[0]
        if records.in_domain(question.name.to_text(), self.domain):
            return self._authoritative(query).to_wire()
        return await self._forward(query)

    def _authoritative(self, query: dns.message.Message) -> dns.message.Message:
        question = query.question[0]
        response = dns.message.make_response(query)
        response.flags |= dns.flags.AA | dns.flags.RA
        found = records.lookup(question.name.to_text(), self.services.get, self._pods_in, self.domain)
        if not found.exists:
            response.set_rcode(dns.rcode.NXDOMAIN)
        elif question.rdtype in (dns.rdatatype.A, dns.rdatatype.ANY) and found.addresses:
            response.answer.append(
                dns.rrset.from_text_list(
                    question.name, records.TTL, dns.rdataclass.IN, dns.rdatatype.A, found.addresses
                )
            )
        return response

    def _pods_in(self, namespace: str) -> list[Obj]:
        return self.pods.by_index(NAMESPACE_INDEX, namespace)

    async def _forward(self, query: dns.message.Message) -> bytes:
        for nameserver in self.upstream:
            try:
                response, _ = await dns.asyncquery.udp_with_fallback(query, nameserver, timeout=FORWARD_TIMEOUT)
            except (dns.exception.DNSException, OSError) as exc:
                log.debug("cluster DNS: %s did not answer %s: %s", nameserver, query.question[0].name, exc)
                continue
            return response.to_wire()
        return _refusal(query, dns.rcode.SERVFAIL)

    async def _serve_tcp(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (length,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
                reply = await self.answer(await reader.readexactly(length))
                if reply is None:
                    break
                writer.write(_LENGTH.pack(min(len(reply), _MAX_TCP_MESSAGE)) + reply[:_MAX_TCP_MESSAGE])
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def _refusal(query: dns.message.Message, rcode: dns.rcode.Rcode) -> bytes:
    response = dns.message.make_response(query)
    response.flags |= dns.flags.RA
    response.set_rcode(rcode)
    return response.to_wire()


class _Udp(asyncio.DatagramProtocol):
    def __init__(self, server: ClusterDns) -> None:
        self.server = server
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str | object, int]) -> None:
        self.server.spawn(self._reply(data, addr))

    async def _reply(self, data: bytes, addr: tuple[str | object, int]) -> None:
        reply = await self.server.answer(data)
        if reply is not None and self.transport is not None and not self.transport.is_closing():
            self.transport.sendto(_truncated(reply, data) if len(reply) > 512 else reply, addr)


def _truncated(reply: bytes, query_wire: bytes) -> bytes:
    """A reply too long for plain UDP: the header with TC set, so the resolver asks again over TCP."""
    with contextlib.suppress(dns.exception.DNSException):
        query = dns.message.from_wire(query_wire)
        if query.payload >= len(reply):  # EDNS allows it
            return reply
        response = dns.message.make_response(query)
        response.flags |= dns.flags.TC | dns.flags.RA
        return response.to_wire()
    return reply
