"""Random and malformed metadata against the parser: it returns a spec or raises one of the
project's errors, which the service maps to a defined gRPC code, and no message shows a
password."""

from __future__ import annotations

import grpc
from hypothesis import HealthCheck, given, settings

from scaler.errors import ScalerError
from scaler.limits import Limits
from scaler.service import status_of
from scaler.spec import parse_metadata
from tests.metadata_strategies import SECRET, metadata

DEFINED = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.UNAVAILABLE,
}


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(metadata([6379, 5672, 1]))
def test_any_metadata_parses_or_is_a_defined_error_without_the_password(
    values: dict[str, str],
) -> None:
    try:
        Limits().check_metadata(values)
        parse_metadata(values, {"orders-redis": f"redis://:{SECRET}@127.0.0.1:6379/0"})
    except ScalerError as error:
        code, message = status_of(error)
        assert code in DEFINED, message
        assert SECRET not in message
