"""The project's one error hierarchy, turned into gRPC status codes in ``scaler.service``.

    ScalerError
    ├── InvalidMetadata      bad trigger metadata          -> INVALID_ARGUMENT
    ├── QueueMisconfigured   the queue is not what the format expects -> FAILED_PRECONDITION
    ├── ResourceExhausted    a server limit is reached (queues, streams) -> RESOURCE_EXHAUSTED
    ├── InvalidTlsFiles      the server's TLS files cannot be served (at start: exit)
    ├── CannotListen         a port of the server cannot be bound (at start: exit)
    └── Unavailable          no fresh figures to answer from -> UNAVAILABLE
        ├── BrokerUnavailable   the broker did not answer
        └── SampleStale         the newest sample is too old, or none came in time

Broker errors carry the broker and the queue, never a URL or a password.
"""

from __future__ import annotations


class ScalerError(Exception):
    """Base of every error this project raises on purpose."""


class InvalidMetadata(ScalerError):
    """A trigger metadata key is missing, unknown or has a bad value."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


class QueueMisconfigured(ScalerError):
    """The queue exists but is not laid out as its format expects (a key of the wrong type)."""


class ResourceExhausted(ScalerError):
    """A limit of the server is reached: this trigger is refused, what already runs goes on."""


class InvalidTlsFiles(ScalerError):
    """The certificate, key or client CA given to ``serve`` cannot be read or do not match."""


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


class Unavailable(ScalerError):
    """No fresh figures for a queue: the broker is down or slow."""


class BrokerUnavailable(Unavailable):
    """The broker could not be reached or did not answer in time."""

    def __init__(self, broker: str, queue: str, detail: str) -> None:
        super().__init__(f"{broker} queue {queue!r}: {detail}")
        self.broker = broker
        self.queue = queue


class SampleStale(Unavailable):
    """The newest sample of a queue is older than the freshness limit, or none arrived in time."""
