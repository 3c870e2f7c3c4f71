"""Keeping the garbage collector's full collections out of a long-lived planner's passes.

A planner holds the cluster's objects for as long as it runs: tens of thousands of parsed pods and nodes, what each
pass derived from them, the last pass. CPython frees an object when its last reference goes; its cycle collector
also traverses, in a full collection, every tracked object of its oldest generation, and starts one on its own once
that generation has grown by a quarter since the last. On the 2,000-node / 20,000-pod benchmark cluster such a
collection takes about half a second, and it lands inside whichever pass allocates at that moment: the planner's
slowest passes after a change were collections, not passes.

`LongLivedHeap.settle`, after each computed pass, freezes every object there is (``gc.freeze``, which moves them
out of the collector's generations without looking at them): the collector no longer traverses them, so the
collections that start on their own see only what was allocated since the last pass. A frozen object is still freed
when its last reference goes; only garbage held in reference cycles and frozen with the rest waits, for the full
collection `settle` makes every ``every`` computed passes (unfreeze, collect everything, freeze again), after a
pass. Every other `settle` costs nothing to speak of (a freeze moves the generations' lists, it does not walk them).
Process-wide: one per process, for its planner, which `release`s the frozen objects to the collector when it stops.
"""

from __future__ import annotations

import gc


class LongLivedHeap:
    """The planner's objects frozen out of the cycle collector's traversals after each computed pass."""

    def __init__(self, every: int = 100) -> None:
        if every < 1:
            raise ValueError(f"every must be at least 1 (computed passes between full collections), not {every}")
        self.every = every
        #: computed passes settled since the last full collection (or since the first `settle`)
        self.since_full = 0
        #: how many full collections `settle` made
        self.full_collections = 0

    def settle(self) -> None:
        """After a computed pass: freeze what there is; every ``every`` passes a full collection first, which also frees
        the cycles frozen since the last one."""
        if self.since_full + 1 >= self.every:
            gc.unfreeze()
            gc.collect()
            self.since_full = 0
            self.full_collections += 1
        else:
            self.since_full += 1
        gc.freeze()

    def release(self) -> None:
        """The frozen objects back to the collector (the planner stops; the process may go on)."""
        gc.unfreeze()
