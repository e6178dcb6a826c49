"""Hosts and addresses: a URL's host, the addresses a host resolves to, whether the open web
reaches them, and what a seed lets a crawl fetch (its host, or a ``file://`` seed's folder).

Reads host names (resolved with the system resolver); writes nothing. ``Crawler.fetch``
(``tasks/crawl/fetch.py``) checks every request with these.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from laminae.tasks.crawl.files import FileProblem, is_file_url, scope_of


def addresses_of(host: str) -> list[str]:
    """The addresses ``host`` is (an IP literal) or resolves to; none when it does not resolve (the
    connection then fails, or the address it reaches is checked: ``Crawler._check_peer``)."""
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
