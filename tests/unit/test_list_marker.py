"""List marker tracking, against a simulated list that behaves as LPUSH/LPOS/LLEN do."""

from __future__ import annotations

from collections import deque

import pytest

from brokers.formats import End
from brokers.list_marker import MIN_MAXLEN, ListMarker, MarkerCounts, MarkerQuery


class FakeList:
    """A Redis list in memory: push at ``push_end``, take at the other end, LPOS with MAXLEN."""

    def __init__(self, push_end: End) -> None:
        self.push_end = push_end
        self.items: deque[bytes] = deque()
        self.next_id = 0

    def push(self, count: int) -> None:
        for _ in range(count):
            item = f'{{"jid": {self.next_id}}}'.encode()
            self.next_id += 1
            if self.push_end is End.HEAD:
                self.items.appendleft(item)
            else:
                self.items.append(item)

    def take(self, count: int) -> None:
        for _ in range(count):
            if self.push_end is End.HEAD:
                self.items.pop()
            else:
                self.items.popleft()

    def requeue_at_oldest_end(self, item: bytes) -> None:
        if self.push_end is End.HEAD:
            self.items.append(item)
        else:
            self.items.appendleft(item)

    def lpos(self, query: MarkerQuery) -> list[int]:
        """LPOS ... RANK r COUNT 2 MAXLEN m, as Redis answers it."""
        indexes = range(len(self.items))
        order = indexes if query.rank > 0 else reversed(indexes)
        found: list[int] = []
        for compared, index in enumerate(order):
            if compared >= query.maxlen or len(found) == 2:
                break
            if self.items[index] == query.marker:
                found.append(index)
        return found

    def sample(self, marker: ListMarker) -> MarkerCounts:
        query = marker.query()
        index = self.lpos(query) if query else None
        newest = None
        if self.items:
            newest = self.items[0] if self.push_end is End.HEAD else self.items[-1]
        return marker.observe(len(self.items), index, newest)


@pytest.mark.parametrize(("push_end", "rank"), [(End.HEAD, 1), (End.TAIL, -1)])
def test_query_searches_from_the_push_end(push_end: End, rank: int) -> None:
    queue, marker = FakeList(push_end), ListMarker(push_end)
    assert marker.query() is None
    queue.push(3)
    queue.sample(marker)
    newest = b'{"jid": 2}'
    assert marker.query() == MarkerQuery(newest, rank, MIN_MAXLEN)


@pytest.mark.parametrize("push_end", [End.HEAD, End.TAIL])
def test_exact_counts_while_a_backlog_remains(push_end: End) -> None:
    queue, marker = FakeList(push_end), ListMarker(push_end)
    queue.push(50)
    assert queue.sample(marker) == MarkerCounts(0, 0, True)
    pushed = taken = 0
    for arrivals, completions in [(7, 3), (0, 10), (12, 0), (5, 5), (30, 29), (1, 20)]:
        queue.push(arrivals)
        queue.take(completions)
        pushed, taken = pushed + arrivals, taken + completions
        assert queue.sample(marker) == MarkerCounts(pushed, taken, True)


@pytest.mark.parametrize("push_end", [End.HEAD, End.TAIL])
def test_interleaved_pushes_and_takes(push_end: End) -> None:
    queue, marker = FakeList(push_end), ListMarker(push_end)
    queue.push(20)
    queue.sample(marker)
    for _ in range(4):
        queue.push(2)
        queue.take(3)
    assert queue.sample(marker) == MarkerCounts(8, 12, True)


@pytest.mark.parametrize("push_end", [End.HEAD, End.TAIL])
def test_drained_list_gives_lower_bounds(push_end: End) -> None:
    queue, marker = FakeList(push_end), ListMarker(push_end)
    queue.push(4)
    queue.sample(marker)
    queue.take(4)  # the marker is taken ...
    queue.push(6)
    queue.take(2)  # ... and 6 arrive, of which 2 are taken too
    counts = queue.sample(marker)
    # seen: 4 now in the list arrived (true 6), at least the 4 before were taken (true 6)
    assert counts == MarkerCounts(4, 4, False)
    queue.push(1)
    assert queue.sample(marker) == MarkerCounts(5, 4, True)


@pytest.mark.parametrize("push_end", [End.HEAD, End.TAIL])
def test_empty_before_gives_lower_bounds(push_end: End) -> None:
    queue, marker = FakeList(push_end), ListMarker(push_end)
    queue.sample(marker)
    assert marker.query() is None
    queue.push(3)
    assert queue.sample(marker) == MarkerCounts(3, 0, False)
    queue.take(3)
    assert queue.sample(marker) == MarkerCounts(3, 3, False)  # the marker was taken
    assert queue.sample(marker) == MarkerCounts(3, 3, False)  # empty before and after


@pytest.mark.parametrize("push_end", [End.HEAD, End.TAIL])
def test_marker_beyond_maxlen_counts_maxlen_and_maxlen_grows(push_end: End) -> None:
    queue, marker = FakeList(push_end), ListMarker(push_end)
    queue.push(10)
    queue.sample(marker)
    queue.push(MIN_MAXLEN + 500)
    # at least MAXLEN arrived; what was taken would be negative (500 unseen arrivals): 0
    assert queue.sample(marker) == MarkerCounts(MIN_MAXLEN, 0, False)
    query = marker.query()
    assert query is not None and query.maxlen == 4 * MIN_MAXLEN
    queue.push(3000)
    assert queue.sample(marker) == MarkerCounts(MIN_MAXLEN + 3000, 0, True)
    query = marker.query()
    assert query is not None and query.maxlen == 12_000


def test_maxlen_follows_arrivals_not_length() -> None:
    queue, marker = FakeList(End.HEAD), ListMarker(End.HEAD)
    queue.push(100_000)
    queue.sample(marker)
    queue.push(10)
    queue.take(10)
    assert queue.sample(marker) == MarkerCounts(10, 10, True)
    query = marker.query()
    assert query is not None and query.maxlen == MIN_MAXLEN


@pytest.mark.parametrize("push_end", [End.HEAD, End.TAIL])
def test_requeue_at_the_oldest_end_never_counts_negative(push_end: End) -> None:
    queue, marker = FakeList(push_end), ListMarker(push_end)
    queue.push(5)
    queue.sample(marker)
    queue.requeue_at_oldest_end(b'{"jid": "back"}')
    queue.requeue_at_oldest_end(b'{"jid": "back again"}')
    queue.push(1)
    assert queue.sample(marker) == MarkerCounts(1, 0, False)


def test_totals_never_decrease() -> None:
    queue, marker = FakeList(End.TAIL), ListMarker(End.TAIL)
    previous = queue.sample(marker)
    for step in range(200):
        queue.push(step * 7 % 13)
        queue.take(min(len(queue.items), step * 5 % 11))
        if step % 17 == 0:
            queue.requeue_at_oldest_end(b"requeued")
        counts = queue.sample(marker)
        assert counts.arrivals_total >= previous.arrivals_total
        assert counts.completions_total >= previous.completions_total
        previous = counts


@pytest.mark.parametrize("push_end", [End.HEAD, End.TAIL])
def test_a_duplicate_of_the_marker_makes_the_count_a_lower_bound(push_end: End) -> None:
    queue, marker = FakeList(push_end), ListMarker(push_end)
    queue.push(5)
    queue.sample(marker)
    newest = marker.query()
    assert newest is not None
    for _ in range(3):  # byte-identical jobs, as plain payloads often are
        if push_end is End.HEAD:
            queue.items.appendleft(newest.marker)
        else:
            queue.items.append(newest.marker)
    counts = queue.sample(marker)
    assert not counts.exact
    assert counts.arrivals_total <= 3


def test_lpos_command_asks_for_two_copies() -> None:
    query = MarkerQuery(b"job", -1, 1000)
    assert query.command("queue:q") == (
        "LPOS",
        "queue:q",
        b"job",
        "RANK",
        -1,
        "COUNT",
        2,
        "MAXLEN",
        1000,
    )


def test_a_list_that_never_held_a_job_is_unused() -> None:
    queue, marker = FakeList(End.HEAD), ListMarker(End.HEAD)
    queue.sample(marker)
    queue.sample(marker)
    assert not marker.ever_used
    queue.push(1)
    queue.sample(marker)
    assert marker.ever_used


@pytest.mark.parametrize("push_end", [End.HEAD, End.TAIL])
def test_a_newest_element_too_large_to_be_a_marker_leaves_the_growth_as_a_lower_bound(
    push_end: End,
) -> None:
    queue, marker = FakeList(push_end), ListMarker(push_end)
    queue.push(5)
    queue.sample(marker)
    queue.push(1)  # a job too large to fetch: the adapter passes no newest element
    query = marker.query()
    assert query is not None
    counts = marker.observe(len(queue.items), queue.lpos(query), None)
    assert counts == MarkerCounts(1, 0, exact=True)
    assert marker.query() is None
    queue.push(4)
    queue.take(6)  # 4 in, 6 out: the list shrank by 2, all that is known to have gone
    assert queue.sample(marker) == MarkerCounts(1, 2, exact=False)
    queue.push(2)
    assert queue.sample(marker) == MarkerCounts(3, 2, exact=True)  # a marker again
