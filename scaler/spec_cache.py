"""Parsed trigger specs and refused metadata, by namespace and metadata.

KEDA asks about every ScaledObject again and again with the same metadata, a broken one too: a
repeat costs a lookup, whether the metadata parsed or was refused. Specs and refusals are kept
apart, each bounded, least recently used dropped first, so that a flood of distinct broken maps
cannot push the healthy triggers' specs out. An entry is keyed by a digest of its namespace and
metadata (BLAKE2b, 32 bytes), not by the metadata itself: a refused map may be 16,384 characters,
and 4,096 of them kept as keys held tens of megabytes after a flood of distinct maps.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Generic, TypeVar

from scaler.errors import InvalidMetadata, PermissionDenied, ScalerError
from scaler.trigger_spec import TriggerSpec

#: distinct (namespace, metadata) pairs whose parsed spec is kept
SPEC_CACHE_SIZE = 4096
#: distinct (namespace, metadata) pairs whose refusal is kept
REFUSAL_CACHE_SIZE = 4096

Key = bytes
LruKey = TypeVar("LruKey", bound=Hashable)
Value = TypeVar("Value")
Parse = Callable[[str, Mapping[str, str]], TriggerSpec]


class Lru(Generic[LruKey, Value]):
    """At most ``size`` entries, the least recently used dropped first."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[LruKey, Value] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: LruKey) -> Value | None:
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def put(self, key: LruKey, value: Value) -> None:
        self._entries[key] = value
        if len(self._entries) > self.size:
            self._entries.popitem(last=False)


class SpecCache:
    """``parse(namespace, metadata)``, remembered: a spec, or the refusal raised again."""

    def __init__(
        self,
        parse: Parse,
        *,
        specs: int = SPEC_CACHE_SIZE,
        refusals: int = REFUSAL_CACHE_SIZE,
    ) -> None:
        self._parse = parse
        self.specs: Lru[Key, TriggerSpec] = Lru(specs)
        self.refusals: Lru[Key, ScalerError] = Lru(refusals)

    def get(self, namespace: str, metadata: Mapping[str, str]) -> TriggerSpec:
        key = spec_key(namespace, metadata)
        spec = self.cached(key)
        return spec if spec is not None else self.parse(key, namespace, metadata)

    def cached(self, key: Key) -> TriggerSpec | None:
        """The spec kept for ``key``; raises the refusal kept for it; None for a key not seen."""
        spec = self.specs.get(key)
        if spec is not None:
            return spec
        refused = self.refusals.get(key)
        if refused is not None:
            raise _copy(refused)
        return None

    def parse(self, key: Key, namespace: str, metadata: Mapping[str, str]) -> TriggerSpec:
        """Parse and keep the spec, or the refusal (raised)."""
        try:
            spec = self._parse(namespace, metadata)
        except (InvalidMetadata, PermissionDenied) as error:
            refused = _bare(error)
            self.refusals.put(key, refused)
            raise _copy(refused) from None
        self.specs.put(key, spec)
        return spec


def spec_key(namespace: str, metadata: Mapping[str, str]) -> Key:
    """A digest of the namespace and the metadata, whatever the keys' order: each string
    length-prefixed, so that no two distinct pairs give the same input."""
    digest = hashlib.blake2b(digest_size=32)
    for text in (namespace, *(part for item in sorted(metadata.items()) for part in item)):
        data = text.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.digest()


def _bare(error: ScalerError) -> ScalerError:
    """The error as kept: without the parse's frames, which its traceback would keep alive."""
    error.__traceback__ = error.__context__ = error.__cause__ = None
    return error


def _copy(error: ScalerError) -> ScalerError:
    """A copy of a kept refusal to raise, so that each raise has a traceback of its own."""
    copy = type(error).__new__(type(error), *error.args)
    copy.__dict__.update(error.__dict__)
    return copy
