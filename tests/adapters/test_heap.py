"""`ebb.adapters.heap.LongLivedHeap`: what a planner's pass leaves frozen out of the cycle collector's traversals,
and the full collection every so many passes that frees the cycles frozen since."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from ebb.adapters.heap import LongLivedHeap


class Node:
    """A cycle's member: it refers to itself, so only the cycle collector frees it."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()


def test_a_settle_freezes_what_there_is_without_collecting_it() -> None:
    heap = LongLivedHeap()
    dropped = Node()
    gone = weakref.ref(dropped)
    del dropped
    heap.settle()
    assert gc.get_freeze_count() > 0
    gc.collect()
    assert gone() is not None  # frozen with the rest: out of the collector's sight
    assert heap.full_collections == 0
    assert heap.since_full == 1


def test_a_frozen_cycle_waits_for_the_full_collection_every_few_passes() -> None:
    heap = LongLivedHeap(every=3)
    frozen = Node()
    heap.settle()  # it is frozen
    gone = weakref.ref(frozen)
    del frozen
    gc.collect()
    assert gone() is not None
    heap.settle()
    assert gone() is not None
    heap.settle()  # the third computed pass: the full collection
    assert gone() is None
    assert heap.full_collections == 1
    assert heap.since_full == 0


def test_passes_between_full_collections_only_freeze() -> None:
    heap = LongLivedHeap(every=100)
    for _ in range(5):
        heap.settle()
    assert heap.full_collections == 0
    assert heap.since_full == 5


def test_release_gives_the_frozen_objects_back_to_the_collector() -> None:
    heap = LongLivedHeap()
    heap.settle()
    assert gc.get_freeze_count() > 0
    heap.release()
    assert gc.get_freeze_count() == 0


@pytest.mark.parametrize("every", [0, -1])
def test_fewer_than_one_pass_between_full_collections_is_refused(every: int) -> None:
    with pytest.raises(ValueError, match="every must be at least 1"):
        LongLivedHeap(every)
