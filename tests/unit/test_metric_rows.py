"""Per-queue and per-trigger series are rows of plain values: few objects for the garbage
collector to walk at thousands of queues; a scrape on the metrics thread goes on while the
event loop changes them, and one that names its metrics builds only those."""

from __future__ import annotations

import gc
import threading

from prometheus_client import generate_latest

from brokers.base import QueueSnapshot, QueueSource
from brokers.connections import Traffic
from brokers.formats import End
from brokers.redis_options import ListLayout
from scaler.metric_rows import PREFIX
from scaler.metrics import Metrics
from scaler.policy import PolicyState, decide
from scaler.signals import compute_signals
from scaler.spec import parse_metadata

QUEUES = 1000


def source(number: int) -> QueueSource:
    return QueueSource("redis", "redis://x", f"q{number}", "rq", ListLayout("rq", End.HEAD))


def fill(metrics: Metrics, count: int) -> None:
    """``count`` queues sampled and ``count`` triggers decided, as a server does."""
    for number in range(count):
        snapshot = QueueSnapshot(observed_at=10.0, depth=3, in_flight=1, consumers=1)
        metrics.record_sample(source(number), snapshot, 0.001, interval=1.0)
        spec = parse_metadata({"url": "redis://x", "queue": f"q{number}", "format": "rq"})
        signals = compute_signals((snapshot,), 60.0)
        decision, _ = decide(signals, spec, 10.0, PolicyState())
        metrics.record_decision("shop", f"so{number}", spec, signals, decision)


def test_a_queue_and_a_trigger_cost_the_collector_a_few_objects() -> None:
    metrics = Metrics()
    fill(metrics, 10)  # the first ones make what every later one shares
    gc.collect()
    before = len(gc.get_objects())
    fill(metrics, QUEUES)
    gc.collect()
    per_queue_and_trigger = (len(gc.get_objects()) - before) / QUEUES
    # a child per series (a gauge and its value) cost about 90 objects per queue and trigger
    assert per_queue_and_trigger < 10
    value = metrics.registry.get_sample_value
    assert (
        value(f"{PREFIX}_samples_total", {"broker": "redis", "queue": "q500", "format": "rq"}) == 1
    )
    trigger = {"namespace": "shop", "scaled_object": "so500", "queue": "q500", "metric": "workers"}
    assert value(f"{PREFIX}_target_age_seconds", trigger) == 60.0


def test_a_scrape_goes_on_while_queues_come_and_go() -> None:
    metrics = Metrics()
    stop = threading.Event()
    failures: list[BaseException] = []

    def scrape() -> None:
        try:
            while not stop.is_set():
                generate_latest(metrics.registry)  # never a dict changing size as it is read
        except BaseException as failure:  # handed to the test's thread
            failures.append(failure)

    scraper = threading.Thread(target=scrape)
    scraper.start()
    try:
        for _ in range(20):
            fill(metrics, 200)
            for number in range(0, 200, 2):
                metrics.forget_queue(source(number))
    finally:
        stop.set()
        scraper.join()
    assert failures == []
    text = generate_latest(metrics.registry).decode()
    assert text.count(f"{PREFIX}_samples_total{{") == 100  # the odd ones, kept
    assert text.count(f"{PREFIX}_queue_oldest_age_seconds{{") == 100


def test_a_scrape_that_names_its_metrics_gets_them() -> None:
    """``/metrics?name[]=...``, as benchmarks and some scrapers ask: the registry knows which
    collector makes which family only from its ``describe``, and builds only those (all of
    them at 10,000 queues: seconds of the metrics thread holding the GIL)."""
    metrics = Metrics()
    fill(metrics, 3)
    sent, other = Traffic(), Traffic()
    sent.commands, sent.round_trips, other.commands, other.round_trips = 5, 2, 7, 1
    metrics.watch_traffic(lambda: {"redis://a": sent, "rediss://b": other})
    wanted = [f"{PREFIX}_samples_total", f"{PREFIX}_desired_workers"]
    wanted += [f"{PREFIX}_broker_commands_total"]
    text = generate_latest(metrics.registry.restricted_registry(wanted)).decode()
    assert text.count(f"{PREFIX}_samples_total{{") == 3
    assert text.count(f"{PREFIX}_desired_workers{{") == 3
    # the traffic summed per kind of broker, never per URL (a URL may hold a password)
    assert f'{PREFIX}_broker_commands_total{{broker="redis"}} 12.0' in text
    assert f"{PREFIX}_broker_round_trips_total" not in text
