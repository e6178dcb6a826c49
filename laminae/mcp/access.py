"""Who may reach ``laminae mcp --http``: where it listens, the bearer token, the Host names it
answers, and how long a client may hold it.

Reads the command line's options, the environment (``LAMINAE_MCP_TOKEN``, the ``LAMINAE_MCP_*``
limits) and the token file; writes nothing. An address beyond loopback needs ``--allow-remote``
and a bearer token (``LAMINAE_MCP_TOKEN`` or ``--token-file``), checked on every request
(``BearerToken``); the SDK's Host/Origin check (DNS rebinding) is set for the bound address
(``transport_security``). Slow and abandoned clients cannot hold the HTTP server: request heads,
stalled bodies and unread responses time out, and connections are capped below the descriptor
limit (``laminae.mcp.http``, settings ``HttpLimits``). A setting that cannot be used is an
``McpConfigError``, checked before the index is opened.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcp.server.transport_security import TransportSecuritySettings

from laminae.schemas.errors import LaminaeError

TOKEN_ENV = "LAMINAE_MCP_TOKEN"
# the HTTP server's hold on connections (laminae/mcp/http.py), nginx's defaults where it has one
HEADER_TIMEOUT_ENV = "LAMINAE_MCP_HEADER_TIMEOUT"  # nginx client_header_timeout 60s
IO_TIMEOUT_ENV = "LAMINAE_MCP_IO_TIMEOUT"  # nginx client_body_timeout and send_timeout 60s
KEEPALIVE_TIMEOUT_ENV = "LAMINAE_MCP_KEEPALIVE_TIMEOUT"  # uvicorn's 5 s (nginx keepalive_timeout 75s)
MAX_CONNECTIONS_ENV = "LAMINAE_MCP_MAX_CONNECTIONS"  # nginx worker_connections 512
DEFAULT_HEADER_TIMEOUT = DEFAULT_IO_TIMEOUT = 60.0
DEFAULT_KEEPALIVE_TIMEOUT = 5.0
DEFAULT_MAX_CONNECTIONS = 512
FD_RESERVE = 128  # descriptors kept for the index's files, the model and the threads, beside connections
MAX_BACKLOG = 2048  # uvicorn's listen backlog
MIN_TOKEN_CHARS = 16
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


class McpConfigError(LaminaeError, ValueError):
    """A setting of ``laminae mcp`` that cannot be used; the message says what to do."""

    exit_code = 2


def parse_http(value: str) -> tuple[str, int]:
    """``HOST:PORT`` for ``--http`` (an IPv6 host in brackets: ``[::1]:8000``); a bare port means
    127.0.0.1."""
    host, _, port = value.rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise McpConfigError(f"--http takes HOST:PORT (e.g. 127.0.0.1:8000); got {value!r}")
    return host.removeprefix("[").removesuffix("]") or "127.0.0.1", int(port)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a bound address) is this machine only: 127.0.0.0/8, ::1 or localhost."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


@dataclass(frozen=True)
class HttpLimits:
    """How long an HTTP client may take and how many connections it may hold (``laminae.mcp.http``)."""

    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    io_timeout: float = DEFAULT_IO_TIMEOUT
    keepalive_timeout: float = DEFAULT_KEEPALIVE_TIMEOUT
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    backlog: int = MAX_BACKLOG  # the listen queue, and the most connections asyncio accepts in one go


def descriptor_limit() -> int | None:
    """This process's soft limit on open file descriptors (None: unlimited or unknown)."""
    try:
        import resource
    except ImportError:  # not a POSIX system
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else soft


def http_limits(environ: Mapping[str, str] = os.environ, fd_limit: int | None = None) -> HttpLimits:
    """The HTTP server's limits from ``$LAMINAE_MCP_HEADER_TIMEOUT``, ``_IO_TIMEOUT``,
    ``_KEEPALIVE_TIMEOUT`` and ``_MAX_CONNECTIONS``, else the defaults.

    Connections must never take the last descriptors (``fd_limit``, default this process's soft
    limit): ``FD_RESERVE`` stay for the index, and asyncio accepts up to the listen backlog of
    sockets at once before any is counted, so the cap plus twice the backlog (a burst, and as many
    connections closed to make room but not yet released) fit in what is left. A default cap is
    lowered to half of that room, the backlog to what the cap leaves; a cap set too high is an
    ``McpConfigError`` naming ``ulimit -n``."""
    def pick(env: str, default: float, kind: type, lo: float, hi: float) -> Any:
        raw = environ.get(env, "").strip()
        if not raw:
            return default
        try:
            value = kind(raw)
        except ValueError:
            raise McpConfigError(f"${env}={raw!r} is not {'a whole' if kind is int else 'a'} number: "
                                 f"set it to {lo:g} to {hi:g}") from None
        if not lo <= value <= hi:
            raise McpConfigError(f"${env}={raw} is out of range: use {lo:g} to {hi:g}")
        return value

    limit = descriptor_limit() if fd_limit is None else fd_limit
    room = None if limit is None else limit - FD_RESERVE
    if room is not None and room < 64:
        raise McpConfigError(f"this process may open only {limit} files: raise the limit (ulimit -n 1024) to "
                             "serve over HTTP")
    default = DEFAULT_MAX_CONNECTIONS if room is None else min(DEFAULT_MAX_CONNECTIONS, room // 2)
    connections = pick(MAX_CONNECTIONS_ENV, default, int, 1, 1_000_000)
    if room is not None and connections > room - 32:
        raise McpConfigError(f"${MAX_CONNECTIONS_ENV}={connections} leaves too few of this process's {limit} file "
                             f"descriptors for the index and for accepting: set it to {room // 2} or less, or "
                             f"raise the limit (ulimit -n {2 * connections + FD_RESERVE})")
    backlog = MAX_BACKLOG if room is None else min(MAX_BACKLOG, (room - connections) // 2)
    return HttpLimits(header_timeout=pick(HEADER_TIMEOUT_ENV, DEFAULT_HEADER_TIMEOUT, float, 0.1, 3600),
                      io_timeout=pick(IO_TIMEOUT_ENV, DEFAULT_IO_TIMEOUT, float, 0.1, 3600),
                      keepalive_timeout=pick(KEEPALIVE_TIMEOUT_ENV, DEFAULT_KEEPALIVE_TIMEOUT, float, 0.1, 3600),
                      max_connections=connections, backlog=backlog)


@dataclass(frozen=True)
class Access:
    """Who may reach an HTTP server: where it listens, the bearer token, the Host names it answers,
    and how long a client may hold it."""

    host: str
    port: int
    token: str | None
    allowed_hosts: tuple[str, ...]
    limits: HttpLimits = field(default_factory=HttpLimits)

    @property
    def remote(self) -> bool:
        return not is_loopback(self.host)


def check_access(http: str | None, allow_remote: bool = False, token_file: str | None = None,
                 allowed_hosts: Sequence[str] = (), environ: Mapping[str, str] = os.environ) -> Access | None:
    """The access rules of ``laminae mcp`` from its options, checked before the index is opened
    (``None`` over stdio). Beyond loopback the server needs ``allow_remote`` and a token; the token
    comes from ``$LAMINAE_MCP_TOKEN`` or ``token_file``, never from the command line (where any
    user of the machine can read it in the process list)."""
    if http is None:
        used = [name for name, on in (("--allow-remote", allow_remote), ("--token-file", token_file),
                                      ("--allowed-host", allowed_hosts)) if on]
        if used:
            raise McpConfigError(f"{', '.join(used)} {'is' if len(used) == 1 else 'are'} for --http only: over stdio the client starts the server "
                                 "and nothing listens on the network")
        return None
    host, port = parse_http(http)
    token = _token(token_file, environ)
    access = Access(host, port, token, tuple(allowed_hosts), http_limits(environ))
    if access.remote and not allow_remote:
        raise McpConfigError(f"--http {http} serves the index beyond this machine: add --allow-remote and a bearer "
                             f"token (${TOKEN_ENV} or --token-file PATH), or bind 127.0.0.1")
    if access.remote and token is None:
        raise McpConfigError(f"--http {http} with --allow-remote needs a bearer token: put one in ${TOKEN_ENV} or in "
                             "a file named by --token-file (e.g. python -c \"import secrets; "
                             "print(secrets.token_urlsafe(32))\")")
    return access


def _token(token_file: str | None, environ: Mapping[str, str]) -> str | None:
    from_env = environ.get(TOKEN_ENV)
    if token_file is not None and from_env is not None:
        raise McpConfigError(f"a bearer token is set both in ${TOKEN_ENV} and by --token-file: keep one")
    if token_file is not None:
        try:
            with open(token_file, encoding="utf-8") as f:
                token, where = f.read().strip(), f"the token file {token_file}"
        except (OSError, UnicodeDecodeError) as exc:
            raise McpConfigError(f"--token-file {token_file} cannot be read ({exc}): name a file holding the token") \
                from None
    elif from_env is not None:
        token, where = from_env.strip(), f"${TOKEN_ENV}"
    else:
        return None
    if len(token) < MIN_TOKEN_CHARS or any(c.isspace() or not c.isprintable() or not c.isascii() for c in token):
        raise McpConfigError(f"{where} holds no usable bearer token: use at least {MIN_TOKEN_CHARS} printable ASCII "
                             "characters without spaces (e.g. python -c \"import secrets; "
                             "print(secrets.token_urlsafe(32))\")")
    return token


def host_names(access: Access) -> list[str]:
    """The names clients may reach the server by (its Host header, port aside): loopback, the bound
    address (for 0.0.0.0 or ::, this machine's host names) and ``access.allowed_hosts``."""
    names = [*LOOPBACK_NAMES]
    if access.host in ("0.0.0.0", "::"):
        names += [socket.gethostname(), socket.getfqdn()]
    elif not is_loopback(access.host):
        names.append(f"[{access.host}]" if ":" in access.host else access.host)
    return list(dict.fromkeys(n for n in (*names, *access.allowed_hosts) if n))


def transport_security(access: Access) -> TransportSecuritySettings:
    """The SDK's Host and Origin checks (DNS rebinding) for a server bound to ``access.host``: the
    ``host_names``, each on any port, over http or https (a TLS proxy in front). A request with another Host header gets 421, with
    another Origin 403; a request without Origin (no browser) passes."""
    names = host_names(access)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[h for n in names for h in (n, f"{n}:*")],
        allowed_origins=[o for n in names for scheme in ("http", "https") for o in (f"{scheme}://{n}",
                                                                                   f"{scheme}://{n}:*")])


class BearerToken:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``, compared
    in constant time; others get 401 with ``WWW-Authenticate: Bearer`` and the connection is
    closed. Not the SDK's ``TokenVerifier`` and ``AuthSettings``: those serve OAuth (an issuer URL
    is required) and guard only the ``/mcp`` route; this is one shared secret on every path.

    The token is checked as soon as the request head is whole (the earliest HTTP allows: the
    token is in the head), before any of the body is read; a client that never finishes its head
    is closed by the header timeout (``laminae.mcp.http``), so holding the server needs no token
    but cannot last."""

    def __init__(self, app: Callable, token: str) -> None:
        self.app = app
        self._token = token.encode("ascii")

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        presented = [v for k, v in scope.get("headers", []) if k == b"authorization"]
        scheme, _, token = presented[0].partition(b" ") if len(presented) == 1 else (b"", b"", b"")
        if scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self._token):
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":
            await send({"type": "websocket.close", "code": 1008})
            return
        challenge = 'Bearer realm="laminae"' + (', error="invalid_token"' if presented else "")
        body = json.dumps({"error": "invalid_token" if presented else "unauthorized",
                           "error_description": "this server needs Authorization: Bearer <its token>"}).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"www-authenticate", challenge.encode()), (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})
