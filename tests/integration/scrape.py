"""The scaler's ``/metrics``, read as Prometheus reads it: each sample by name and labels."""

from __future__ import annotations

import asyncio
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

#: (metric name, its labels sorted) -> value
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    """The samples of Prometheus' text format."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def scrape(port: int | None) -> Samples:
    """GET ``/metrics`` on ``port`` (off the event loop, where the server runs)."""

    def read() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            body: bytes = reply.read()
            return body.decode()

    return parse(await asyncio.to_thread(read))
