"""The demand history a NodePool's ``demandWindow`` reads: what its pods requested, sample by sample.

A ``demandWindow`` (ebb's churn control, docs/architecture.md) keeps a NodePool's capacity at the peak of what
its pods requested within the window, so that the nodes a burst of work needed are still there when the next
burst comes, while capacity no recent peak asked for is consolidated as before. The peak needs a past: a
running planner records the demand of each pass it computes (`recorded`) and hands the record to the next
pass in ``Snapshot.demand``; `ebb.core.cluster.ClusterView` takes the peak. The record is kept small: a sample
older than its pool's window is dropped, and so is one that a later sample of the same pool matches or exceeds
in cpu and in memory (the later one stays in the window longer, so the earlier one can never be the peak), and two
samples of a pool at one moment are one, the larger of each (the peak is the same). Pure: values in, values out.
"""

from __future__ import annotations

from ebb.core.cluster import ClusterView
from ebb.core.model import DemandSample


def recorded(history: tuple[DemandSample, ...], view: ClusterView) -> tuple[DemandSample, ...]:
    """``history`` with the demand of ``view`` at its ``now`` added (one sample per NodePool with a window), less
    the samples no window reaches any more and those a later sample makes useless; oldest first."""
    now, windows = view.now, view.demand_windows
    samples = [s for s in history if s.pool in windows and (now - s.at).total_seconds() < windows[s.pool]
               and s.at <= now]
    for pool, demand in sorted(view.demand_now.items()):
        sample = DemandSample(pool, now, *demand)
        same = next((s for s in samples if s.pool == pool and s.at == now), None)
        if same is not None:  # a pass at the same moment before: one sample, the larger of each
            samples.remove(same)
            sample = DemandSample(pool, now, max(sample.cpu, same.cpu), max(sample.memory, same.memory))
        samples.append(sample)
    samples.sort(key=lambda s: s.at)  # a later sample makes an earlier one useless, never the other way round
    kept: list[DemandSample] = []
    highest: dict[str, list[tuple[int, int]]] = {}  # pool -> the later samples' (cpu, memory) seen so far
    for sample in reversed(samples):
        later = highest.setdefault(sample.pool, [])
        if any(cpu >= sample.cpu and memory >= sample.memory for cpu, memory in later):
            continue
        later.append((sample.cpu, sample.memory))
        kept.append(sample)
    kept.reverse()
    return tuple(kept)
