"""Allocation strategies: valid partitions, balance, stability, and Java's answers."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocklet.client.allocate import (
    STRATEGIES,
    AllocateStrategy,
    allocate_averagely,
    allocate_averagely_by_circle,
    allocate_consistent_hash,
)
from rocklet.protocol.bodies.queue import MessageQueue

queues_st = st.lists(
    st.builds(
        MessageQueue,
        st.sampled_from(["T", "U"]),
        st.sampled_from(["broker-a", "broker-b", "broker-c"]),
        st.integers(0, 15),
    ),
    min_size=1,
    max_size=40,
    unique=True,
)
cids_st = st.lists(
    st.builds("10.0.0.{}@{}".format, st.integers(0, 255), st.integers(0, 99999)),
    min_size=1,
    max_size=12,
    unique=True,
)


def assign_all(
    strategy: AllocateStrategy, mqs: list[MessageQueue], cids: list[str]
) -> dict[str, list[MessageQueue]]:
    # Each consumer sees the lists in its own order; the answers must still agree.
    return {
        cid: strategy("G", cid, list(reversed(mqs)) if i % 2 else mqs, cids)
        for i, cid in enumerate(cids)
    }


def verify_valid(assignment: dict[str, list[MessageQueue]], mqs: list[MessageQueue]) -> None:
    counts = Counter(mq for share in assignment.values() for mq in share)
    assert set(counts) == set(mqs), "every queue is assigned"
    assert all(c == 1 for c in counts.values()), "no queue is assigned twice"


@pytest.mark.parametrize("name", sorted(STRATEGIES))
@settings(max_examples=100, deadline=None)
@given(mqs=queues_st, cids=cids_st)
def test_every_queue_goes_to_exactly_one_consumer(
    name: str, mqs: list[MessageQueue], cids: list[str]
) -> None:
    verify_valid(assign_all(STRATEGIES[name], mqs, cids), mqs)


@pytest.mark.parametrize("strategy", [allocate_averagely, allocate_averagely_by_circle])
@settings(max_examples=100, deadline=None)
@given(mqs=queues_st, cids=cids_st)
def test_average_strategies_balance_within_one(
    strategy: AllocateStrategy, mqs: list[MessageQueue], cids: list[str]
) -> None:
    sizes = [len(share) for share in assign_all(strategy, mqs, cids).values()]
    assert max(sizes) - min(sizes) <= 1


@settings(max_examples=100, deadline=None)
@given(mqs=queues_st, cids=cids_st, newcomer=st.builds("10.1.0.{}@1".format, st.integers(0, 9)))
def test_consistent_hash_moves_only_queues_to_the_newcomer(
    mqs: list[MessageQueue], cids: list[str], newcomer: str
) -> None:
    before = assign_all(allocate_consistent_hash, mqs, cids)
    after = assign_all(allocate_consistent_hash, mqs, [*cids, newcomer])
    owner_before = {mq: cid for cid, share in before.items() for mq in share}
    owner_after = {mq: cid for cid, share in after.items() for mq in share}
    moved = {mq for mq in mqs if owner_before[mq] != owner_after[mq]}
    # A queue only ever moves to the consumer that joined, never between old ones.
    assert all(owner_after[mq] == newcomer for mq in moved)


def test_consistent_hash_moves_few_queues_when_one_joins() -> None:
    mqs = [MessageQueue("T", f"broker-{b}", q) for b in "abcd" for q in range(16)]
    cids = [f"10.0.0.{i}@{i}" for i in range(8)]
    before = assign_all(allocate_consistent_hash, mqs, cids)
    after = assign_all(allocate_consistent_hash, mqs, [*cids, "10.0.0.99@99"])
    owner = {mq: cid for cid, share in before.items() for mq in share}
    moved = sum(1 for cid, share in after.items() for mq in share if owner[mq] != cid)
    # The averaging strategy would reshuffle most of the 64; the ring moves about 1/9.
    assert 0 < moved <= 64 // 4
    averagely_before = assign_all(allocate_averagely, mqs, cids)
    averagely_after = assign_all(allocate_averagely, mqs, [*cids, "10.0.0.99@99"])
    avg_owner = {mq: cid for cid, share in averagely_before.items() for mq in share}
    avg_moved = sum(
        1 for cid, share in averagely_after.items() for mq in share if avg_owner[mq] != cid
    )
    assert moved < avg_moved


def test_averagely_matches_java_blocks() -> None:
    mqs = [MessageQueue("T", "b", q) for q in range(8)]
    cids = ["c1", "c2", "c3"]
    shares = [[mq.queue_id for mq in allocate_averagely("G", c, mqs, cids)] for c in cids]
    assert shares == [[0, 1, 2], [3, 4, 5], [6, 7]]
    circle = [[mq.queue_id for mq in allocate_averagely_by_circle("G", c, mqs, cids)] for c in cids]
    assert circle == [[0, 3, 6], [1, 4, 7], [2, 5]]


def test_more_consumers_than_queues_and_unknown_consumer() -> None:
    mqs = [MessageQueue("T", "b", q) for q in range(2)]
    cids = ["a", "b", "c"]
    assert [len(allocate_averagely("G", c, mqs, cids)) for c in cids] == [1, 1, 0]
    for strategy in STRATEGIES.values():
        assert strategy("G", "stranger", mqs, cids) == []
        assert strategy("G", "a", [], cids) == []
