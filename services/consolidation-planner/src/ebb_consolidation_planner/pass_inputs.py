"""What a planning pass reads, and whether any of it changed since the last pass: ``PassInputs``.

A pass (``ebb.core.engine.run_pass``) is a function of its snapshot, the engine options and ``now``. The snapshot is
made of the cluster objects (the ``SnapshotStore``, whose ``version`` counts every change applied to it) and of what
the decision store holds that a pass reads: the nodes of live decisions, the replacements they launch and the holds
in force. ``PassInputs.read`` gathers those store reads and a key of everything the pass reads (the objects' version,
the store's state, the options); ``reusable`` gives the last pass's answer back when a pass now would answer the
same: the key is the last one's (or the snapshot it makes is equal: a change where the snapshot does not look), the
last pass made no command (a command changes the store once proposed), and ``now`` is neither before that pass nor
at or past its ``revisit_at`` (``ebb.core.revisit``: the first moment a pass over the same snapshot could decide
differently). So a settled cluster costs a few reads a pass, not a pass, and the answer is the one a full pass
would give.

The store's state comes in one of two ways, and that is the only difference between the modes:

- **several writers** (the distributed mode: planner replicas, the executor and the decisions-api on PostgreSQL): the
  three reads themselves, every pass. They are small (live decisions are bounded by the budgets, holds by what
  operators make), indexed, and exact whoever wrote: a counter or ``max(updated_at)`` would need every writer to keep
  it, or trust their clocks, to be right.
- **one writer** (``writes``: the embedded mode, whose process makes every write to its store and counts them): the
  reads are kept until the count moves, so a pass on an unchanged store does not read it. Reading yields to the event
  loop (other tasks run and the objects can change meanwhile); without a read, a computed pass sees the objects at
  the same moment as a pass answered from the last one, and the run is the same with reuse on or off. Holds kept
  from a read are filtered by ``now`` (one that expires is left out by the time, not by a read).

``reuse`` off makes every pass computed (``reusable`` answers None). An answer reused keeps the wording of the pass
it came from: a blocked node's explanation that counts an age ("launched 3m ago") says what it said then.

A pass that is computed takes what it can from the last one computed: ``alone``
(``ebb.core.methods.single_node.AloneVerdicts``), what consolidating each node alone did on that pass's start state,
which the explanations of the nodes waiting for their budget take where the part of the state it read is unchanged
(the answer is the one computed whole). With ``reuse`` off, none is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

from ebb.adapters.live import core_holds
from ebb.adapters.snapshot_store import SnapshotStore
from ebb.adapters.store.port import HoldRow, Store
from ebb.core.engine import PassResult
from ebb.core.methods.base import EngineOptions
from ebb.core.methods.single_node import AloneVerdicts
from ebb.core.model import Snapshot

#: what the planner keeps of a pass to answer the next one with (its view, findings, ...)
Answer = TypeVar("Answer")


@dataclass(frozen=True)
class PassRead:
    """What a pass at one moment reads from the store, and the key of all it reads: equal keys make equal
    snapshots (the objects' version is read last, with no wait between it and the snapshot the caller takes)."""

    #: the cluster objects' version (``SnapshotStore.version``)
    version: int
    #: the store's state as far as a pass reads it: the reads themselves, or the write count they were made at
    state: Hashable
    options: EngineOptions
    #: the nodes of live decisions
    busy: frozenset[str]
    #: replacement name -> the live decision that launches it
    launched: dict[str, str]
    #: the holds in force at the moment of the read
    holds: list[HoldRow]

    @property
    def key(self) -> Hashable:
        return self.version, self.state, self.options


@dataclass
class _Last(Generic[Answer]):
    key: Hashable
    snapshot: Snapshot
    result: PassResult
    answer: Answer


class PassInputs(Generic[Answer]):
    """Tells the planner what its pass reads and whether that changed since the last pass it computed."""

    def __init__(self, objects: SnapshotStore, store: Store, *, reuse: bool = True,
                 writes: Callable[[], int] | None = None) -> None:
        self.objects = objects
        self.store = store
        #: answer a pass from the last one while nothing it reads changed and its revisit_at has not come
        self.reuse = reuse
        #: the number of writes to ``store``, when this process makes them all (None: other processes write too)
        self.writes = writes
        #: the reads at a write count (``writes``): every hold, expired ones too, filtered by the moment of a pass
        self._kept: tuple[int, frozenset[str], dict[str, str], Sequence[HoldRow]] | None = None
        self._last: _Last[Answer] | None = None
        #: the last computed pass's ``revisit_at``: the first moment a pass over what it read could decide otherwise (a
        #: budget window opening, a node's expiry, a consolidateAfter running out); None before a pass, or when
        #: nothing of that kind is ahead. The embedded mode's ``--until-stable`` does not stop before it
        self.revisit_at: datetime | None = None
        #: what consolidating each node alone did on the last computed pass, for the next one (``run_pass``'s
        #: ``alone``); None with ``reuse`` off
        self.alone: AloneVerdicts | None = AloneVerdicts() if reuse else None

    @property
    def sole_writer(self) -> bool:
        """This process makes every write to the store (the embedded mode: the planner and the store live and die
        together, so nothing of the store needs reading back after a pass or saving for a next leader)."""
        return self.writes is not None

    async def read(self, now: datetime, options: EngineOptions) -> PassRead:
        """The store's reads for a pass at ``now`` and the key of everything that pass reads."""
        if self.writes is None:
            busy = frozenset(await self.store.live_nodes())
            launched = await self.store.live_replacements()
            holds = list(await self.store.list_holds(now))
            state: Hashable = (busy, tuple(sorted(launched.items())), core_holds(holds))
        else:
            revision = self.writes()
            kept = self._kept
            if kept is None or kept[0] != revision:
                kept = self._kept = (revision, frozenset(await self.store.live_nodes()),
                                     await self.store.live_replacements(),
                                     await self.store.list_holds(now, include_expired=True))
            # the reads were made at this count: a later write moves it (reading writes nothing)
            state, busy, launched, every = kept
            holds = [h for h in every if h.in_force(now)]
        return PassRead(self.objects.version, state, options, busy, dict(launched), holds)

    def reusable(self, read: PassRead, now: datetime, snapshot: Snapshot | None = None) -> Answer | None:
        """The last pass's answer when a pass on ``read`` at ``now`` would give it: the same key (or, given the
        ``snapshot`` the read makes, the same snapshot: then the key is taken as the last one's), no commands, and
        ``now`` in ``[last pass's now, its revisit_at)``. None: compute the pass."""
        last = self._last
        if not self.reuse or last is None or last.result.commands:
            return None
        if last.key != read.key and (snapshot is None or snapshot != last.snapshot):
            return None
        revisit = last.result.revisit_at
        if now < last.result.now or (revisit is not None and now >= revisit):
            return None
        last.key = read.key
        return last.answer

    def forget(self) -> None:
        """Compute the next pass whatever it reads (this replica starts leading)."""
        self._last = None

    def computed(self, read: PassRead, snapshot: Snapshot, result: PassResult, answer: Answer) -> None:
        """Keep the pass computed on ``read`` (its ``snapshot``, ``result`` and the caller's ``answer``) for later."""
        self.revisit_at = result.revisit_at
        if self.reuse:
            self._last = _Last(read.key, snapshot, result, answer)
