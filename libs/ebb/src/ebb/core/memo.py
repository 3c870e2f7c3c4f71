"""Bounded memos: what the core keeps between passes holds at most a set number of entries.

A long-lived planner computes over snapshots that share most of their objects, and the core keeps what it made
from them (a node's derived pods, a spec's relaxations, a NodePool's offerings, ...) so the next pass answers
from it. Keys come and go with the cluster (nodes replaced, pods with new specs), so every such memo needs a
bound, and one rule for making room: `Memo` owns both. Past its size it forgets everything (``forget="all"``:
the cheapest, for memos whose entries are made again in microseconds as they are asked) or its oldest entry
(``forget="oldest"``: for a few entries that are dear to make again). Entries are values: reading one is a plain
``dict`` lookup, safe from any thread without a lock; `Memo.keep` takes a lock, so two threads adding at once
never drop an entry the other is reading past, and a race only makes one entry twice.
"""

from __future__ import annotations

import threading
from typing import Literal, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Memo(dict[K, V]):
    """A ``dict`` of at most ``size`` entries, added to with `keep`."""

    __slots__ = ("_forget_all", "_lock", "size")

    def __init__(self, size: int, *, forget: Literal["all", "oldest"] = "all") -> None:
        if size < 1:
            raise ValueError(f"a memo holds at least one entry, not {size}")
        super().__init__()
        self.size = size
        self._forget_all = forget == "all"
        self._lock = threading.Lock()

    def keep(self, key: K, value: V) -> V:
        """Keep ``value`` under ``key`` as the newest entry, making room first when the memo is full; returns
        ``value``."""
        with self._lock:
            self.pop(key, None)  # kept again: now the newest
            if len(self) >= self.size:
                if self._forget_all:
                    self.clear()
                else:
                    while len(self) >= self.size:
                        del self[next(iter(self))]
            self[key] = value
        return value
