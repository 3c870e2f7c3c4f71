"""Reusing a pass until its ``revisit_at`` never changes what a pass decides (ebb.core.revisit).

On generated clusters whose answers move with time (consolidateAfter ripening, expireAfter, do-not-disrupt
durations, holds, stabilization windows, demand samples leaving a demand window, scheduled budgets, disruption
costs that shrink towards expiry), a
planner that computes a pass at every tick and one that computes only when the last pass's ``revisit_at`` has
come (reusing the last answer before) must give the same commands, findings and budgets at every tick; and any
moment before ``revisit_at`` (the last microsecond included) answers as the pass did."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from ebb.core.cluster import ClusterView
from ebb.core.engine import PassResult, run_pass
from ebb.core.findings import findings
from ebb.core.methods.base import EngineOptions
from ebb.core.model import DemandSample, Snapshot
from ebb.core.plan import command_json
from tests.kit.builders import NOW, ago, hold, later, node, nodepool, pod, snapshot

TYPES = ("m5.large", "c5.large", "m5.xlarge", "t3.medium")
OPTIONS = EngineOptions(explain=False)


@st.composite
def clusters(draw: st.DrawFn) -> Snapshot:
    budgets: list[dict[str, str]] = [{"nodes": draw(st.sampled_from(["100%", "50%", "1"]))}]
    if draw(st.booleans()):
        budgets.append({"nodes": "0", "schedule": draw(st.sampled_from(["0 19 * * *", "*/45 * * * *", "0 17 * * 1-5"])),
                        "duration": draw(st.sampled_from(["20m", "1h", "3h"]))})
    docs: list[Any] = [nodepool(
        consolidate_after=draw(st.sampled_from(["0s", "1m", "10m", "30m"])),
        expire_after=draw(st.sampled_from([None, "2h", "6h", "100h"])),
        stabilization_window=draw(st.sampled_from([None, None, "10m", "1h"])), budgets=budgets,
        disruption={"demandWindow": draw(st.sampled_from(["0s", "20m", "1h"]))})]
    nodes = draw(st.integers(2, 6))
    for i in range(nodes):
        name = f"n{i}"
        docs.append(node(name, itype=draw(st.sampled_from(TYPES)),
                         created=ago(minutes=draw(st.integers(0, 600)))))
        for j in range(draw(st.integers(0, 3))):
            annotations = {}
            if draw(st.integers(0, 4)) == 0:
                annotations["karpenter.sh/do-not-disrupt"] = draw(st.sampled_from(["15m", "1h", "true"]))
            docs.append(pod(f"p{i}-{j}", name, cpu=draw(st.sampled_from(["100m", "500m", "1"])),
                            started=ago(minutes=draw(st.integers(0, 120))), annotations=annotations,
                            priority=draw(st.sampled_from([None, 0, 1000]))))
    if draw(st.integers(0, 3)) == 0:
        docs.append(hold("h", expires_at=later(minutes=draw(st.integers(1, 180)))))
    # what a planner recorded: peaks of up to 12 cpu and 48 GiB in the last 90 minutes
    samples = draw(st.lists(st.tuples(st.integers(0, 90), st.integers(0, 12000), st.integers(0, 48)), max_size=3))
    return replace(snapshot(*docs), demand=tuple(
        DemandSample("default", NOW - timedelta(minutes=minutes), cpu, gib * 2**30) for minutes, cpu, gib in samples))


def answer(view: ClusterView, result: PassResult) -> tuple[Any, ...]:
    """What a pass decides: its commands, its findings and budgets, without the wording that counts an age (an
    expired node's "launched 4h ago": a pass with commands is never reused, and a finding's reason is not read)."""
    found = sorted((f.node, f.kind, f.since, f.reason if f.kind == "Drifted" else "")
                   for fs in findings(view).values() for f in fs)
    commands = [{k: v for k, v in command_json(c).items() if k != "explanation"} for c in result.commands]
    return commands, found, result.budgets


def at(snap: Snapshot, minutes: float) -> tuple[ClusterView, PassResult]:
    view = OPTIONS.view_of(snap, NOW + timedelta(minutes=minutes))
    return view, run_pass(view, OPTIONS)


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_passes_reused_until_revisit_at_decide_as_passes_at_every_tick(snap: Snapshot) -> None:
    last: tuple[ClusterView, PassResult] | None = None
    computed = 0
    for tick in range(0, 6 * 60, 5):  # a pass every 5 minutes for 6 hours
        view, result = at(snap, tick)
        now = view.now
        if last is None or last[1].revisit_at is None or now >= last[1].revisit_at or last[1].commands:
            last, computed = (view, result), computed + 1
        note(f"tick {tick} min: revisit_at {last[1].revisit_at}")
        assert answer(*last) == answer(view, result), f"at +{tick} min"
    note(f"{computed} passes computed")


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.lists(st.floats(0, 1, exclude_max=True), max_size=3))
def test_a_pass_answers_the_same_until_its_revisit_at(snap: Snapshot, fractions: list[float]) -> None:
    view, result = at(snap, 0)
    revisit = result.revisit_at
    end = revisit if revisit is not None else NOW + timedelta(days=3)
    note(f"revisit_at {revisit}")
    assert revisit is None or revisit >= NOW
    # (end - NOW) * f is rounded to the microsecond: a fraction just under 1 can land on ``end`` itself
    last = end - timedelta(microseconds=1)
    moments = [min(NOW + (end - NOW) * f, last) for f in fractions] + [last] if end > NOW else []
    for moment in moments:
        later_view = OPTIONS.view_of(snap, moment)
        assert answer(later_view, run_pass(later_view, OPTIONS)) == answer(view, result), f"at {moment}"
