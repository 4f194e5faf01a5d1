"""Processes the demo (and the real-loop test) start: one process group for all of them, so
that whatever happens they can all be stopped, and a fleet of worker processes that KEDA scales.

The children get a process group of their own, not the caller's: a Ctrl-C in the terminal
reaches the caller alone, which then stops them in order (workers drain first, then the server,
then Redis) instead of every process dying at once.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class ProcessGroup:
    """Every process started through :meth:`spawn` shares one process group."""

    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    pgid: int | None = None

    def spawn(
        self,
        command: Sequence[str],
        *,
        cwd: Path | None = None,
        output: IO[bytes] | int | None = None,
    ) -> subprocess.Popen[bytes]:
        if self.pgid is not None and all(p.poll() is not None for p in self.processes):
            self.pgid = None  # the group is gone with its last member: start a new one
        process = subprocess.Popen(
            list(command),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT if output is not None else None,
            process_group=0 if self.pgid is None else self.pgid,
        )
        if self.pgid is None:
            self.pgid = process.pid
        self.processes.append(process)
        return process

    @property
    def alive(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in self.processes if p.poll() is None]

    def kill(self) -> None:
        """SIGKILL to the group (children the processes started included), then reap them."""
        if self.pgid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pgid, signal.SIGKILL)
        for process in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(5)


def stop(process: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds."""
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)


@dataclass
class WorkerFleet:
    """Worker processes, as a Deployment runs them: ``scale`` starts the missing ones and sends
    SIGTERM to the newest extra ones, which finish their running jobs and exit (the drain)."""

    command: Sequence[str]
    group: ProcessGroup
    cwd: Path | None = None
    output: IO[bytes] | int | None = None
    running: list[subprocess.Popen[bytes]] = field(default_factory=list)
    draining: list[subprocess.Popen[bytes]] = field(default_factory=list)
    #: the most worker processes alive at once, draining ones included
    most_alive: int = 0

    def scale(self, replicas: int) -> None:
        while len(self.running) < replicas:
            process = self.group.spawn(self.command, cwd=self.cwd, output=self.output)
            self.running.append(process)
        while len(self.running) > replicas:
            newest = self.running.pop()
            newest.send_signal(signal.SIGTERM)
            self.draining.append(newest)
        self.watch()

    def watch(self) -> None:
        self.draining = [p for p in self.draining if p.poll() is None]
        self.most_alive = max(self.most_alive, self.alive)

    @property
    def ready(self) -> int:
        """Workers not told to stop (the pods the HPA counts as ready)."""
        return len(self.running)

    @property
    def alive(self) -> int:
        return sum(1 for p in self.running + self.draining if p.poll() is None)

    def stop(self, grace: float = 10.0) -> None:
        """Drain every worker; SIGKILL those still running after ``grace`` seconds."""
        self.scale(0)
        deadline = time.monotonic() + grace
        for process in self.draining:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(max(0.0, deadline - time.monotonic()))
            if process.poll() is None:
                process.kill()
                process.wait(5)
        self.watch()
