"""The bounds on what one trigger's metadata may hold, checked before anything parses or keeps it."""

from __future__ import annotations

import pytest

from scaler.errors import InvalidMetadata
from scaler.limits import Limits


def test_ordinary_metadata_passes() -> None:
    Limits().check_metadata(
        {"scalerAddress": "scaler:6000", "queue": "default", "url": "redis://r:6379/0"}
    )


def test_too_many_keys_names_the_count_and_the_flag() -> None:
    metadata = {f"key{i}": "x" for i in range(65)}
    with pytest.raises(InvalidMetadata) as caught:
        Limits().check_metadata(metadata)
    assert caught.value.key == "scalerMetadata"
    assert "65 keys; at most 64" in str(caught.value)
    assert "--max-metadata-keys" in str(caught.value)


def test_long_value_names_its_key_and_length() -> None:
    with pytest.raises(InvalidMetadata) as caught:
        Limits(max_value_length=100).check_metadata({"queue": "q" * 101})
    assert caught.value.key == "queue"
    assert "101 characters long; at most 100" in str(caught.value)


def test_long_key_is_cut_in_the_message() -> None:
    with pytest.raises(InvalidMetadata) as caught:
        Limits(max_value_length=100).check_metadata({"k" * 5000: "v"})
    assert caught.value.key == "k" * 60 + "..."
    assert len(str(caught.value)) < 300


def test_total_size_is_bounded_even_when_each_value_fits() -> None:
    limits = Limits(max_value_length=100, max_metadata_chars=500)
    limits.check_metadata({f"k{i}": "v" * 90 for i in range(5)})  # 5 x 92 = 460
    with pytest.raises(InvalidMetadata) as caught:
        limits.check_metadata({f"k{i}": "v" * 90 for i in range(6)})
    assert "552 characters in all; at most 500" in str(caught.value)
