"""The engine's pass against validation: every command a pass proposes is valid against the very snapshot and
time it was computed from. Validation re-simulates a command as it will be carried out (every node removed at
once, all their pods placed together); a method that found its command another way (multi-node
consolidation grows its set one node at a time) must only propose what that re-simulation accepts, or the
planner proposes, rejects and proposes the same command again on every pass (found on the embedded mode's
300-node example and next to the real Karpenter: a 23-node replace rejected every 20 s for 3 minutes)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from hypothesis import HealthCheck, event, given, note, settings

from ebb.core.engine import run_pass
from ebb.core.methods.base import EngineOptions
from ebb.core.model import LABEL_INITIALIZED, Budget
from ebb.core.validation import validate
from tests.property.test_simulator_properties import Case, cases

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


@settings(max_examples=1500, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(cases(max_nodes=12, max_pods=40, max_remove=0))
def test_every_command_of_a_pass_validates_on_its_own_snapshot(case: Case) -> None:
    # budgets that never stop a method, so multi-node consolidation runs on these small clusters
    pools = tuple(replace(p, budgets=(Budget(nodes="100%"),)) for p in case.snapshot.nodepools)
    # initialized nodes (the simulator's cases leave them uninitialized: no candidates at all); nodes being
    # disrupted (a disruption taint) are kept: their pods are placed first in both simulations, and an emptiness
    # command must not take an empty node they have nowhere else to go than (it did, before emptiness simulated)
    nodes = tuple(replace(n, labels={**n.labels, LABEL_INITIALIZED: "true"}) for n in case.snapshot.nodes)
    snapshot = replace(case.snapshot, nodes=nodes, nodepools=pools)
    options = EngineOptions()
    result = run_pass(options.view_of(snapshot, NOW), options)
    for command in result.commands:
        note(f"{command.method} {command.action} {command.nodes}")
        event(command.method)
        assert validate(command, snapshot, NOW, options) is None
