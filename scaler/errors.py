"""The project's one error hierarchy, turned into gRPC status codes in ``scaler.service``.

    ScalerError
    ├── InvalidMetadata      bad trigger metadata          -> INVALID_ARGUMENT
    ├── PermissionDenied     metadata the operator does not allow (a profile of another
    │                        namespace, a URL outside --allow-url)  -> PERMISSION_DENIED
    ├── QueueMisconfigured   the queue, or the way to it, is not what the trigger says; no
    │   │                    retry fixes it                 -> FAILED_PRECONDITION
    │   ├── NotTheBroker        the server at the URL answered, but not as the broker
    │   └── BrokerRefused       the broker refused the credentials or the user's permissions
    ├── ResourceExhausted    a server limit is reached (queues, streams) -> RESOURCE_EXHAUSTED
    ├── InvalidTlsFiles      the server's TLS files cannot be served (at start: exit)
    ├── InvalidProfile       a connection profile cannot be read (at start: exit)
    ├── InvalidPlugin        a format plugin cannot be used (at start: exit)
    ├── CannotListen         a port of the server cannot be bound (at start: exit)
    └── Unavailable          no fresh figures to answer from -> UNAVAILABLE
        ├── BrokerUnavailable   the broker did not answer
        │   └── BrokerUnreachable  refused, reset, timed out, unknown host: no answer at all
        └── SampleStale         the newest sample is too old, or none came in time

The adapter contract's errors (:mod:`brokers.errors`: the root, ``InvalidMetadata``,
``QueueMisconfigured`` and its kinds, ``Unavailable`` and the broker's outages, the fixed
sentences) are defined there, so that brokers/ imports nothing from scaler/, and re-exported
here; the server's own errors are added below.

``str()`` of an error is what a client is told; its ``detail`` only the server's log
(:mod:`brokers.errors` says more).
"""

from __future__ import annotations

from brokers.errors import (
    NOT_THE_BROKER,
    REFUSED,
    TLS_FILES,
    UNREACHABLE,
    BrokerRefused,
    BrokerUnavailable,
    BrokerUnreachable,
    InvalidMetadata,
    InvalidPlugin,
    NotTheBroker,
    QueueMisconfigured,
    ScalerError,
    Unavailable,
)

__all__ = [
    "NOT_THE_BROKER",
    "REFUSED",
    "TLS_FILES",
    "UNREACHABLE",
    "BrokerRefused",
    "BrokerUnavailable",
    "BrokerUnreachable",
    "CannotListen",
    "InvalidMetadata",
    "InvalidPlugin",
    "InvalidProfile",
    "InvalidTlsFiles",
    "NotTheBroker",
    "PermissionDenied",
    "QueueMisconfigured",
    "ResourceExhausted",
    "SampleStale",
    "ScalerError",
    "Unavailable",
]


class PermissionDenied(ScalerError):
    """Valid metadata that the scaler's operator does not allow this trigger: a connection
    profile scoped to other namespaces, a URL outside the ``--allow-url`` rules, or any URL
    under ``--profiles-only``. The message names the key and the rule, never a URL or password."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


class ResourceExhausted(ScalerError):
    """A limit of the server is reached: this trigger is refused, what already runs goes on."""


class InvalidTlsFiles(ScalerError):
    """The certificate, key or client CA given to ``serve`` cannot be read or do not match."""


class InvalidProfile(ScalerError):
    """A connection profile in the scaler's configuration cannot be read; names the profile and
    where it came from, never its URL."""


class CannotListen(ScalerError):
    """A port ``serve`` was told to listen on is taken, not permitted or not on this host.

    ``setting`` is the :class:`scaler.server.ServerConfig` field that gave the port (``port``,
    ``metrics_port``, ``health_port``), so the command line can name its option; ``in_use`` tells
    a port another process holds from one this host cannot offer (a bad address, no permission).
    """

    def __init__(self, setting: str, message: str, *, in_use: bool) -> None:
        super().__init__(message)
        self.setting = setting
        self.in_use = in_use


class SampleStale(Unavailable):
    """The newest sample of a queue is older than the freshness limit, or none arrived in time."""
