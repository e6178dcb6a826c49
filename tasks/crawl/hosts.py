"""Hosts and addresses: a URL's host, the addresses a host resolves to, whether the open web
reaches them, what a seed lets a crawl fetch (its host, or a ``file://`` seed's folder), and a
crawl's ``Scope``, which checks every URL before it is asked.

Reads host names (resolved with the system resolver), the crawl settings' ``allow_hosts`` and
``allow_private``, and the real paths of ``file://`` seed folders; writes nothing. ``Crawler.fetch``
(``tasks/crawl/request.py``) checks each redirect hop with ``Scope.refusal`` before asking it (a
seed's or allow-listed host; not a private, loopback, link-local or other non-global address
unless it is a seed's host or allowed by ``allow_private``: the name is resolved and its addresses
checked), and the address a response really came from with ``Scope.check_peer`` before its body is
read; the crawl (``tasks/crawl/fetch.py``) checks each link the same way before it follows it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

from laminae.tasks.config import CrawlConfig
from laminae.tasks.crawl.files import FileProblem, inside, is_file_url, real_roots, scope_of
from laminae.tasks.crawl.results import Failure


def addresses_of(host: str) -> list[str]:
    """The addresses ``host`` is (an IP literal) or resolves to; none when it does not resolve (the
    connection then fails, or the address it reaches is checked: ``Scope.check_peer``)."""
    try:
        return [str(ipaddress.ip_address(host.strip("[]")))]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return []
    return list(dict.fromkeys(str(info[4][0]).split("%", 1)[0] for info in infos))


def plain_address(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An address with the IPv4 address an IPv6 one carries (mapped ``::ffff:a.b.c.d``, 6to4) unwrapped."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        return ip.ipv4_mapped or ip.sixtofour or ip
    return ip


def is_non_global(address: str) -> bool:
    """A private, loopback, link-local, shared, reserved, multicast or unspecified address: one the
    open web does not reach."""
    ip = plain_address(address)
    return not ip.is_global or ip.is_multicast


def is_private_host(host: str) -> bool:
    """True when ``host`` is, or resolves to, a non-global address (``is_non_global``)."""
    return any(is_non_global(a) for a in addresses_of(host))


def host_of(url: str) -> str:
    """``host`` or ``host:port`` of a URL, lowercased; an IPv6 host keeps its brackets; "" for
    what has no usable host (``canonical_url`` refuses it: nothing is fetched from there)."""
    try:
        parts = urlsplit(url)
        host, port = (parts.hostname or "").lower(), parts.port
    except ValueError:
        return ""
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{port}" if port else host


def bare_host(host: str) -> str:
    """The host name of a ``host_of`` string, its port and brackets removed."""
    try:
        return (urlsplit("//" + host).hostname or "").lower()
    except ValueError:
        return ""


def seed_scope(url: str) -> str:
    """What a seed lets the crawl fetch: its host, or for a ``file://`` seed its folder's URL; ""
    for a seed that is no usable URL (a remembered bad line: the crawl reports it)."""
    try:
        return scope_of(url) if is_file_url(url) else host_of(url)
    except (ValueError, FileProblem):
        return ""


def is_network(entry: str) -> bool:
    """Is an ``allow_private`` entry an address or network (else: a host name)."""
    try:
        ipaddress.ip_network(entry, strict=False)
    except ValueError:
        return False
    return True


class Scope:
    """What one crawl may fetch: ``seed_hosts`` are ``seed_scope``s, hosts and the folder URLs of
    ``file://`` seeds (under which files are read); allow-listed hosts; and private addresses only
    on a seed's host or as ``allow_private`` says. Each host's addresses are resolved once."""

    def __init__(self, cfg: CrawlConfig, seed_hosts: Iterable[str]) -> None:
        seed_hosts = set(seed_hosts)
        self.roots = real_roots(seed_hosts)
        self.seed_hosts = {h.lower() for h in seed_hosts if not is_file_url(h)}
        self.seed_names = {bare_host(h) for h in self.seed_hosts}  # a seed's host may be private
        self.allow_hosts = {h.lower() for h in cfg.allow_hosts}
        self.private_names = {a for a in cfg.allow_private if not is_network(a)}
        self.private_networks = [ipaddress.ip_network(a, strict=False) for a in cfg.allow_private if is_network(a)]
        self._addresses: dict[str, list[str]] = {}

    def in_scope(self, url: str) -> bool:
        """May this URL be fetched at all: http(s) on a seed host or an allow-listed host."""
        if urlsplit(url).scheme not in ("http", "https"):
            return False
        host = host_of(url)
        return host in self.seed_hosts or host in self.allow_hosts or bare_host(host) in self.allow_hosts

    async def refusal(self, url: str) -> Failure | None:
        """Why ``url`` may not be fetched (``out_of_scope``, ``private_address``), or None: the
        check of every redirect hop and of every link before it is followed. A ``file://`` URL
        may be read when its real path is inside a seed folder."""
        if is_file_url(url):
            try:
                await asyncio.to_thread(self.in_folders, url)
            except FileProblem as problem:
                return Failure(problem.reason, problem.message)
            return None
        if not self.in_scope(url):
            return Failure("out_of_scope", f"{url} is not on a seed or allow-listed host")
        host = host_of(url)
        name = bare_host(host)
        if name in self.seed_names or name in self.private_names or host in self.private_names:
            return None
        if name not in self._addresses:
            self._addresses[name] = await asyncio.to_thread(addresses_of, name)
        for address in self._addresses[name]:
            if not self._private_allowed(address):
                return Failure("private_address", self._private_message(url, name, address))
        return None

    def _private_allowed(self, address: str) -> bool:
        return not is_non_global(address) or any(plain_address(address) in net for net in self.private_networks)

    @staticmethod
    def _private_message(url: str, name: str, address: str) -> str:
        at = "" if name == address else f" ({name} is at {address})"
        return (f"{url} is on a private, loopback, link-local or other non-global address{at} and is not a "
                f"seed's host; not fetched (allow it with --allow-private {name} or its network)")

    def check_peer(self, url: str, peer: tuple | None) -> None:
        """Refuse a response from ``peer`` (the connection's ``server_addr``: address and port) when
        that address is non-global and not what the name resolved to when checked (DNS rebinding):
        the request was sent, its body is never read."""
        if not peer:
            return
        host = host_of(url)
        name = bare_host(host)
        if name in self.seed_names or name in self.private_names or host in self.private_names:
            return
        address = str(peer[0]).split("%", 1)[0]
        if not self._private_allowed(address):
            raise Failure("private_address", self._private_message(url, name, address) + "; it answered from "
                          "there although the name resolved elsewhere when checked, and its body was not read")

    def in_folders(self, url: str) -> None:
        """Raise FileProblem unless ``url`` is a local file inside a seed folder."""
        inside(url, self.roots)
