"""A port ``serve`` cannot have is a one-line error naming its option, exit 2, and no server.

gRPC sets SO_REUSEPORT by default: a second ``serve`` on a port in use used to start and share
it, splitting KEDA's calls between two processes. The real command runs as a subprocess here.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

COMMAND = str(Path(sys.executable).parent / "queue-age-scaler")


@contextlib.contextmanager
def held_port() -> Iterator[int]:
    """A port some other program listens on (every address, IPv4 and IPv6)."""
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as holder:
        holder.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        holder.bind(("::", 0))
        holder.listen()
        yield holder.getsockname()[1]


@contextlib.contextmanager
def running_serve(*args: str) -> Iterator[subprocess.Popen[str]]:
    """A real ``serve``, once it logs that it listens."""
    with subprocess.Popen(
        [COMMAND, "serve", *args], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    ) as process:
        try:
            assert process.stderr is not None
            line = process.stderr.readline()
            assert "serving gRPC" in line, line
            yield process
        finally:
            process.terminate()
            process.wait(timeout=20)


def serve_fails(*args: str) -> tuple[int, str]:
    """Run ``serve`` that must not start: its exit status and stderr (a server that does start
    would run until the timeout, which fails the test)."""
    done = subprocess.run(
        [COMMAND, "serve", *args], capture_output=True, text=True, timeout=20, check=False
    )
    return done.returncode, done.stderr


@pytest.mark.parametrize(
    ("args", "loop"), [([], "uvloop"), (["--event-loop", "asyncio"], "asyncio")]
)
def test_serve_runs_on_uvloop_unless_told_asyncio_and_says_which(
    args: list[str], loop: str
) -> None:
    with subprocess.Popen(
        [COMMAND, "serve", "--port", "0", "--metrics-port", "0", *args],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    ) as process:
        try:
            assert process.stderr is not None
            line = process.stderr.readline()
            assert f"serving gRPC (plain text, {loop} event loop) on port" in line, line
        finally:
            process.terminate()
            process.wait(timeout=20)


def test_a_second_serve_on_the_same_grpc_port_stops_with_one_line() -> None:
    with held_port() as free:
        pass  # a port nobody holds now
    with running_serve("--port", str(free), "--no-metrics"):
        code, err = serve_fails("--port", str(free), "--no-metrics")
    assert code == 2
    assert err == f"serve: port {free} is already in use; choose another with --port\n"


@pytest.mark.parametrize(
    ("option", "others"),
    [
        ("--port", ["--no-metrics"]),
        ("--metrics-port", ["--port", "0"]),
        ("--health-port", ["--port", "0", "--no-metrics"]),
    ],
)
def test_a_port_in_use_names_its_option(option: str, others: list[str]) -> None:
    with held_port() as taken:
        code, err = serve_fails(*others, option, str(taken))
    assert code == 2
    assert err == f"serve: port {taken} is already in use; choose another with {option}\n"


def test_an_address_this_host_does_not_have_names_host_and_port() -> None:
    # 192.0.2.0/24 is TEST-NET-1 (RFC 5737): never an address of this machine
    code, err = serve_fails("--host", "192.0.2.1", "--port", "0", "--no-metrics")
    assert code == 2
    assert err.splitlines()[-1] == (
        "serve: cannot listen on 192.0.2.1:0 (Cannot assign requested address); "
        "check --host and --port"
    )
