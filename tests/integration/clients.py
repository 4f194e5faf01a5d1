"""The job libraries' reference clients, driven from the tests: Node BullMQ through
``tests/clients/bullmq_driver.js`` and Ruby Sidekiq through ``tests/clients/sidekiq_*.rb``.

``scripts/clients`` (run by ``scripts/test``) installs them; a missing runtime or package fails
the test that needs it, never skips it.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

CLIENTS = Path(__file__).resolve().parents[1] / "clients"
NODE_DIR = Path(
    os.environ.get("QAS_NODE_DIR", Path.home() / ".cache" / "queue-age-scaler" / "node")
)


def runtime(name: str) -> str:
    """The path of the ``name`` executable; fails the test when it is not installed."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed; scripts/clients installs it", pytrace=False)
    return path


def node_modules() -> Path:
    """The node_modules ``scripts/clients`` fills; fails the test when BullMQ is not there."""
    modules = NODE_DIR / "node_modules"
    if not (modules / "bullmq" / "package.json").is_file():
        pytest.fail(
            f"BullMQ for Node is not installed in {NODE_DIR}; run scripts/clients", pytrace=False
        )
    return modules


def ruby_sidekiq() -> str:
    """The ruby that loads Sidekiq and redis-rb; fails the test when either is missing."""
    ruby = runtime("ruby")
    check = subprocess.run(
        [ruby, "-e", 'require "sidekiq"; require "redis"; print Sidekiq::VERSION'],
        capture_output=True,
        text=True,
        check=False,
    )
    if check.returncode != 0:
        pytest.fail(f"Ruby cannot load Sidekiq ({check.stderr.strip()}); run scripts/clients")
    return ruby


async def until(check: Callable[[], Awaitable[bool]], seconds: float = 30) -> None:
    """Wait for ``check`` to come true (a client's process doing what it was told)."""
    deadline = time.monotonic() + seconds
    while not await check():
        assert time.monotonic() < deadline, "the condition did not come true"
        await asyncio.sleep(0.1)


class BullMQDriver:
    """One Node process holding a BullMQ Queue (and the Workers it starts) for one queue."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process

    @classmethod
    async def start(cls, redis_url: str, queue: str, prefix: str = "bull") -> BullMQDriver:
        node = runtime("node")
        process = await asyncio.create_subprocess_exec(
            node,
            str(CLIENTS / "bullmq_driver.js"),
            redis_url,
            queue,
            prefix,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "NODE_PATH": str(node_modules())},
            limit=64 * 2**20,  # the "log" reply of a benchmark run is one long line
        )
        return cls(process)

    async def call(self, op: str, **args: Any) -> dict[str, Any]:
        """Send one command, wait for its reply; a reply with an error fails the test."""
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write((json.dumps({"op": op, **args}) + "\n").encode())
        await self._process.stdin.drain()
        line = await asyncio.wait_for(self._process.stdout.readline(), 30)
        if not line:
            pytest.fail(f"the BullMQ driver exited (status {await self._process.wait()})")
        reply: dict[str, Any] = json.loads(line)
        if "error" in reply:
            pytest.fail(f"BullMQ driver, {op}: {reply['error']}")
        return reply

    async def add(self, count: int = 1, **opts: Any) -> list[str]:
        ids: list[str] = (await self.call("add", count=count, opts=opts))["ids"]
        return ids

    async def close(self) -> None:
        if self._process.returncode is None:
            try:
                await self.call("close")
            finally:
                if self._process.returncode is None:
                    self._process.kill()
                await self._process.wait()


class SidekiqProcess:
    """A real Sidekiq process (Debian's sidekiq) running ``HoldJob`` for the given queues."""

    def __init__(self, redis_url: str, queues: list[str], concurrency: int) -> None:
        ruby_sidekiq()
        command = [
            runtime("sidekiq"),
            "-r",
            str(CLIENTS / "sidekiq_jobs.rb"),
            "-c",
            str(concurrency),
        ]
        for queue in queues:
            command += ["-q", queue]
        self.process = subprocess.Popen(
            command,
            env={**os.environ, "REDIS_URL": redis_url},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def signal(self, number: int) -> None:
        self.process.send_signal(number)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def sidekiq_push(
    redis_url: str, queue: str, plain: int, scheduled: int = 0, retries: int = 0
) -> None:
    """Push jobs with the real Sidekiq client (``tests/clients/sidekiq_push.rb``)."""
    subprocess.run(
        [
            ruby_sidekiq(),
            str(CLIENTS / "sidekiq_push.rb"),
            queue,
            str(plain),
            str(scheduled),
            str(retries),
        ],
        env={**os.environ, "REDIS_URL": redis_url},
        check=True,
        capture_output=True,
    )
