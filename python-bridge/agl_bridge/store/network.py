"""Across machines: TLS for the bridge's clients and servers, and the check that what a trainer publishes into the
store is an address its consumers can reach.

Clients verify servers against a CA file (``ca_file``, default ``$AGL_CA_FILE``; else the system's CAs) and present a
client certificate for mutual TLS (``cert_file``/``key_file``, default ``$AGL_CLIENT_CERT``/``$AGL_CLIENT_KEY``).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import ssl
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import grpc

from agl_bridge.errors import ConfigError

__all__ = [
    "ClientTls",
    "is_loopback_host",
    "server_ssl_context",
    "unreachable_warning",
    "warn_if_unreachable",
    "with_host",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClientTls:
    """How a client verifies https servers, and its certificate for mutual TLS (PEM files)."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None

    @staticmethod
    def from_env(ca_file: str | None = None, cert_file: str | None = None, key_file: str | None = None) -> ClientTls:
        """The given files, else ``$AGL_CA_FILE``, ``$AGL_CLIENT_CERT`` and ``$AGL_CLIENT_KEY``."""
        tls = ClientTls(
            ca_file or os.environ.get("AGL_CA_FILE") or None,
            cert_file or os.environ.get("AGL_CLIENT_CERT") or None,
            key_file or os.environ.get("AGL_CLIENT_KEY") or None,
        )
        if (tls.cert_file is None) != (tls.key_file is None):
            raise ConfigError("a client certificate needs its key, and a key its certificate (AGL_CLIENT_CERT/KEY)")
        return tls

    def grpc_credentials(self) -> grpc.ChannelCredentials:
        """Channel credentials for ``grpc.aio.secure_channel``."""
        return grpc.ssl_channel_credentials(_read(self.ca_file), _read(self.key_file), _read(self.cert_file))

    def ssl_context(self) -> ssl.SSLContext:
        """An ``ssl`` context for urllib or httpx (``verify=``)."""
        context = ssl.create_default_context(cafile=self.ca_file)
        if self.cert_file and self.key_file:
            context.load_cert_chain(self.cert_file, self.key_file)
        return context


def _read(path: str | None) -> bytes | None:
    return Path(path).read_bytes() if path else None


def server_ssl_context(cert_file: str, key_file: str, client_ca_file: str | None = None) -> ssl.SSLContext:
    """A server's TLS: its certificate chain and key; with ``client_ca_file``, clients must present a certificate
    that CA signed (mutual TLS)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    if client_ca_file:
        context.load_verify_locations(client_ca_file)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def is_loopback_host(host: str) -> bool:
    """``localhost``, 127.0.0.0/8 and ``::1``."""
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_of(address: str) -> str:
    parts = urlsplit(address if "//" in address else f"//{address}")
    return parts.hostname or ""


def unreachable_warning(url: str, store_address: str, flag: str) -> str | None:
    """Why ``url`` may not reach its consumers, naming ``flag``: a wildcard host (0.0.0.0, ::) nobody can dial from
    elsewhere, or a loopback URL published into a store on another host (a proxy or runners there could not reach
    it). None when neither. A warning, not an error: a consumer on this host (``agl train``'s proxy) still can."""
    host = _host_of(url)
    if host in ("0.0.0.0", "::"):
        return f"publishing {url}, which names the wildcard address {host}: set {flag} to an address others can reach"
    if is_loopback_host(host) and not is_loopback_host(_host_of(store_address)):
        return (
            f"publishing {url} into the store at {store_address}, which is on another host: consumers on other "
            f"hosts cannot reach a loopback address; set {flag} to an address they can reach"
        )
    return None


def warn_if_unreachable(url: str, store_address: str, flag: str) -> str | None:
    """Logs :func:`unreachable_warning` loudly (and returns it) when there is one."""
    warning = unreachable_warning(url, store_address, flag)
    if warning is not None:
        log.warning("WARNING: %s", warning)
    return warning


def with_host(url: str, host: str | None) -> str:
    """``url`` with its host replaced by ``host`` (the advertised address), port and path kept; unchanged without."""
    if not host:
        return url
    parts = urlsplit(url)
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc = f"{netloc}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
