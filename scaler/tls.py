"""TLS and mutual TLS for the gRPC port, with certificates reloaded when their files change.

gRPC calls :meth:`CertificateReloader.__call__` before every new connection's handshake (on
one of its own threads). It answers "no change" unless a file's identity (inode, size, mtime)
moved, so a rotation by cert-manager (a Secret volume swaps its ``..data`` symlink) or by hand
is served from the next connection on, without a restart. A half-written or mismatched pair is
not served: the current certificate stays until the files are consistent again.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path

import grpc

from scaler.errors import InvalidTlsFiles

log = logging.getLogger(__name__)

_Stamp = tuple[tuple[int, int, int], ...]


@dataclass(frozen=True)
class TlsFiles:
    """PEM files: the server's certificate chain and key, and the CA that client certificates
    must chain to (mutual TLS when set)."""

    cert: Path
    key: Path
    client_ca: Path | None = None

    @property
    def paths(self) -> tuple[Path, ...]:
        return (
            (self.cert, self.key)
            if self.client_ca is None
            else (self.cert, self.key, self.client_ca)
        )


class CertificateReloader:
    """The certificate configuration fetcher for ``grpc.dynamic_ssl_server_credentials``."""

    def __init__(self, files: TlsFiles) -> None:
        self._files = files
        self._lock = threading.Lock()
        loaded = self._load()
        if loaded is None:
            raise InvalidTlsFiles("the TLS files changed while they were read; try again")
        self._stamp, self.initial = loaded
        self._rejected: _Stamp | None = None

    def __call__(self) -> grpc.ServerCertificateConfiguration | None:
        """A new configuration when the files changed and are consistent; None for no change."""
        with self._lock:
            try:
                if self._stat() == self._stamp:
                    return None
                loaded = self._load()
            except (InvalidTlsFiles, OSError) as error:
                self._warn_once(error)
                return None
            if loaded is None:  # the files moved while they were read: next connection retries
                return None
            self._stamp, configuration = loaded
            self._rejected = None
            log.info("TLS: serving the new certificate from %s", self._files.cert)
            return configuration

    def _warn_once(self, error: Exception) -> None:
        try:
            stamp = self._stat()
        except OSError:
            stamp = ()
        if stamp != self._rejected:
            self._rejected = stamp
            log.warning("TLS: keeping the current certificate: %s", error)

    def _stat(self) -> _Stamp:
        stats = [os.stat(path) for path in self._files.paths]
        return tuple((s.st_ino, s.st_size, s.st_mtime_ns) for s in stats)

    def _load(self) -> tuple[_Stamp, grpc.ServerCertificateConfiguration] | None:
        """Check the files with OpenSSL, then read them; None if they changed in between."""
        files = self._files
        before = self._stat()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            context.load_cert_chain(files.cert, files.key)
        except ssl.SSLError as error:
            raise InvalidTlsFiles(
                f"{files.cert} and {files.key} are not a PEM certificate chain and its private key "
                f"({error.reason or error})"
            ) from None
        if files.client_ca is not None:
            try:
                context.load_verify_locations(cafile=files.client_ca)
            except ssl.SSLError as error:
                raise InvalidTlsFiles(
                    f"{files.client_ca} holds no PEM CA certificate ({error.reason or error})"
                ) from None
        cert, key = files.cert.read_bytes(), files.key.read_bytes()
        client_ca = files.client_ca.read_bytes() if files.client_ca is not None else None
        if self._stat() != before:
            return None
        return before, grpc.ssl_server_certificate_configuration([(key, cert)], client_ca)


def server_credentials(files: TlsFiles) -> grpc.ServerCredentials:
    """Credentials for ``add_secure_port``: mutual TLS when ``files.client_ca`` is set."""
    try:
        reloader = CertificateReloader(files)
    except OSError as error:
        raise InvalidTlsFiles(f"cannot read the TLS files: {error}") from None
    return grpc.dynamic_ssl_server_credentials(
        reloader.initial,
        reloader,  # type: ignore[arg-type]  # grpc takes None for "no change"; the stubs omit it
        require_client_authentication=files.client_ca is not None,
    )
