"""The errors of the adapter contract: what a broker module raises, for a format's options and
for a sample, and the root of the project's one error hierarchy.

    ScalerError
    ├── InvalidMetadata      a bad trigger metadata key (a format's option too)
    ├── QueueMisconfigured   the queue, or the way to it, is not what the trigger says; no
    │   │                    retry fixes it
    │   ├── NotTheBroker        the server at the URL answered, but not as the broker
    │   └── BrokerRefused       the broker refused the credentials or the user's permissions
    └── Unavailable          no fresh figures to answer from
        └── BrokerUnavailable   the broker did not answer
            └── BrokerUnreachable  refused, reset, timed out, unknown host: no answer at all

``scaler.errors`` adds the server's own errors to this hierarchy and ``scaler.service.status_of``
turns every one into a gRPC code. ``str()`` of an error is what a client is told: broker errors
carry the broker and the queue, never a URL, a host, a password, a file's name or anything the
remote end sent. What the operator needs beyond that (the errno text, the remote's reply) is the
error's ``detail``, which goes to the server's log only (:attr:`ScalerError.logged`). A
connection failure is told to the client in one fixed sentence per kind (:data:`UNREACHABLE`,
:data:`NOT_THE_BROKER`, :data:`REFUSED`), so a trigger's URL cannot be used to tell one kind of
closed or foreign port from another, nor a missing file from an unreadable one
(:data:`TLS_FILES`).
"""

from __future__ import annotations

from urllib.parse import urlsplit

#: the sentence for a broker that gave no answer: refused, closed, reset, timed out, unknown host
UNREACHABLE = (
    "the broker could not be reached or gave no answer (connection refused, closed, reset or "
    "timed out, or an unknown host); check the host, the port and the network"
)
#: the sentence for a server that answered, but not as the broker ({} is the protocol)
NOT_THE_BROKER = (
    "the server at the URL's host and port did not answer as {}; check the port and the scheme"
)
#: the sentence for a broker that refused the login or a command
REFUSED = (
    "the broker refused the URL's credentials or the user's permissions; check the user, the "
    "password and what the user may do"
)
#: the sentence for a TLS file (CA, certificate, key) that cannot be loaded, whatever the cause
TLS_FILES = "a TLS file that the URL names cannot be loaded (the scaler's log has the cause)"


def logged_detail(error: BaseException, url: str) -> str:
    """What went wrong, for an error's ``detail`` (the server's log): the error's type and text,
    with the URL and its password taken out."""
    detail = f"{type(error).__name__}: {error}"
    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    for secret in (url, password):
        if secret:
            detail = detail.replace(secret, "<hidden>")
    return detail


class ScalerError(Exception):
    """Base of every error this project raises on purpose, the adapters' and the server's.

    ``detail`` is for the server's log only: never sent to a client."""

    def __init__(self, message: str, *, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail

    @property
    def logged(self) -> str:
        """What the server's log says: the message, and the detail where there is one."""
        return f"{self} [{self.detail}]" if self.detail else str(self)


class InvalidMetadata(ScalerError):
    """A trigger metadata key is missing, unknown or has a bad value."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


class QueueMisconfigured(ScalerError):
    """The queue exists but is not laid out as its format expects (a key of the wrong type), or
    the way to it is wrong (not the broker, refused): trying again will not help."""


class NotTheBroker(QueueMisconfigured):
    """The server at the URL answered, but not in the broker's protocol (PostgreSQL, HTTP...)."""

    def __init__(self, broker: str, queue: str, protocol: str, *, detail: str) -> None:
        super().__init__(
            f"{broker} queue {queue!r}: {NOT_THE_BROKER.format(protocol)}", detail=detail
        )
        self.broker = broker
        self.queue = queue


class BrokerRefused(QueueMisconfigured):
    """The broker refused the login (a wrong password) or a command (ACL, permissions)."""

    def __init__(self, broker: str, queue: str, *, detail: str, message: str = REFUSED) -> None:
        super().__init__(f"{broker} queue {queue!r}: {message}", detail=detail)
        self.broker = broker
        self.queue = queue


class Unavailable(ScalerError):
    """No fresh figures for a queue: the broker is down or slow."""


class BrokerUnavailable(Unavailable):
    """The broker could not be reached or did not answer in time."""

    def __init__(self, broker: str, queue: str, message: str, *, detail: str = "") -> None:
        super().__init__(f"{broker} queue {queue!r}: {message}", detail=detail)
        self.broker = broker
        self.queue = queue


class BrokerUnreachable(BrokerUnavailable):
    """No answer at all: the connection was refused, closed, reset or timed out, or the host is
    unknown."""

    def __init__(self, broker: str, queue: str, *, detail: str) -> None:
        super().__init__(broker, queue, UNREACHABLE, detail=detail)


class InvalidPlugin(ScalerError):
    """A format plugin (an entry point of ``queue_age_scaler.formats``) cannot be used: it does
    not load, is not a format, or names a format, broker, scheme or key that is taken. Names the
    plugin and its distribution; every command stops on it at start."""
