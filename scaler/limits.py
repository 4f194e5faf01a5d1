"""What one server takes from the triggers it serves: bounds that keep any ScaledObject, broken or
hostile, from costing the scaler (or its other tenants) more than a fair share.

Each bound has a ``serve`` flag and a default that a cluster of ordinary size never meets. A
trigger past a bound on its metadata is ``INVALID_ARGUMENT`` (it can be fixed by editing it); past
a bound on what the server runs (queues sampled, streams) it is ``RESOURCE_EXHAUSTED``, and what
already runs keeps working.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scaler.errors import InvalidMetadata

#: a trigger's metadata: at most this many keys (this scaler knows about 60, KEDA adds three)
MAX_METADATA_KEYS = 64
#: and at most this many characters in one key or value (a URL with TLS options fits easily)
MAX_VALUE_LENGTH = 4096
#: and at most this many characters in all its keys and values together
MAX_METADATA_CHARS = 16384
#: distinct queues sampled at once by one server
MAX_QUEUES = 10000
#: distinct queues sampled at once on one broker (one URL or connection profile)
MAX_QUEUES_PER_BROKER = 2000
#: StreamIsActive streams open at once
MAX_STREAMS = 2000
#: triggers with Prometheus series of their own (the others' decisions are counted, not shown)
MAX_TRIGGER_SERIES = 10000
#: metadata maps not seen before waiting to be parsed at once (scaler.parse_turns)
MAX_NEW_METADATA = 256
#: metadata maps not seen before parsed a second, at most (scaler.parse_turns)
NEW_METADATA_RATE = 500.0


@dataclass(frozen=True, slots=True)
class Limits:
    """The bounds of one server; see the module's constants for what each one means."""

    max_metadata_keys: int = MAX_METADATA_KEYS
    max_value_length: int = MAX_VALUE_LENGTH
    max_metadata_chars: int = MAX_METADATA_CHARS
    max_queues: int = MAX_QUEUES
    max_queues_per_broker: int = MAX_QUEUES_PER_BROKER
    max_streams: int = MAX_STREAMS
    max_trigger_series: int = MAX_TRIGGER_SERIES
    max_new_metadata: int = MAX_NEW_METADATA
    new_metadata_rate: float = NEW_METADATA_RATE

    def check_metadata(self, metadata: Mapping[str, str]) -> None:
        """Refuse metadata too large to parse, before anything keeps or parses it."""
        if len(metadata) > self.max_metadata_keys:
            raise InvalidMetadata(
                "scalerMetadata",
                f"{len(metadata)} keys; at most {self.max_metadata_keys} are taken "
                "(the scaler's --max-metadata-keys): remove the keys this scaler does not know",
            )
        total = 0
        longest = self.max_value_length
        for key, value in metadata.items():
            if len(key) > longest or len(value) > longest:  # the message only when refused
                shown = _shown_key(key)
                what, size = (
                    ("a key", len(key))
                    if len(key) > longest
                    else (f"the value of {shown}", len(value))
                )
                raise InvalidMetadata(
                    shown,
                    f"{what} is {size} characters long; at most {longest} are taken "
                    "(the scaler's --max-value-length)",
                )
            total += len(key) + len(value)
        if total > self.max_metadata_chars:
            raise InvalidMetadata(
                "scalerMetadata",
                f"{total} characters in all; at most {self.max_metadata_chars} are taken "
                "(the scaler's --max-metadata-chars)",
            )


def _shown_key(key: str) -> str:
    """A key as a message may name it: long keys are cut, since they come from anyone."""
    return key if len(key) <= 64 else f"{key[:60]}..."
