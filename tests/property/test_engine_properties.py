"""The engine's pass against validation: every command a pass proposes is valid against the very snapshot and
time it was computed from. Validation re-simulates a command as it will be carried out (every node removed at
once, all their pods placed together); a method that found its command another way (multi-node
consolidation grows its set one node at a time) must only propose what that re-simulation accepts, or the
planner proposes, rejects and proposes the same command again on every pass (found on the embedded mode's
300-node example and next to the real Karpenter: a 23-node replace rejected every 20 s for 3 minutes)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from unittest.mock import patch

from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

from ebb.core.causes import BlockCause, Cause
from ebb.core.engine import _context, run_pass
from ebb.core.methods import multi_node, single_node
from ebb.core.methods.base import SEARCHES, EngineOptions, PassContext
from ebb.core.methods.kept import RefusalSession
from ebb.core.model import LABEL_INITIALIZED, POLICY_BALANCED, Budget, NodePool, Pod
from ebb.core.simulator.scheduler import SimState
from ebb.core.validation import validate
from tests.kit.simulator_cases import Case, cases

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def _pools(case: Case, balanced: bool) -> tuple[NodePool, ...]:
    """The case's NodePools with a budget that never stops a method, Balanced when ``balanced``."""
    return tuple(replace(p, budgets=(Budget(nodes="100%"),),
                         consolidation_policy=POLICY_BALANCED if balanced else p.consolidation_policy)
                 for p in case.snapshot.nodepools)


@settings(max_examples=1500, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(cases(max_nodes=12, max_pods=40, max_remove=0), st.booleans(), st.sampled_from(SEARCHES))
def test_every_command_of_a_pass_validates_on_its_own_snapshot(case: Case, balanced: bool, search: str) -> None:
    # budgets that never stop a method, so multi-node consolidation runs on these small clusters; the NodePools
    # consolidate WhenEmptyOrUnderutilized or, half the time, Balanced (its score only ever takes commands away)
    pools = _pools(case, balanced)
    # initialized nodes (the simulator's cases leave them uninitialized: no candidates at all); nodes being
    # disrupted (a disruption taint) are kept: their pods are placed first in both simulations, and an emptiness
    # command must not take an empty node they have nowhere else to go than (it did, before emptiness simulated)
    nodes = tuple(replace(n, labels={**n.labels, LABEL_INITIALIZED: "true"}) for n in case.snapshot.nodes)
    snapshot = replace(case.snapshot, nodes=nodes, nodepools=pools)
    # multi-node's greedy runs or its optimizer search (a linear program's proposal, simulated before it is kept)
    options = EngineOptions(search=search)
    result = run_pass(options.view_of(snapshot, NOW), options)
    for command in result.commands:
        note(f"{command.method} {command.action} {command.nodes}")
        event(command.method)
        assert validate(command, snapshot, NOW, options) is None


@settings(max_examples=800, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(cases(max_nodes=12, max_pods=40, max_remove=0), st.booleans(), st.booleans())
def test_a_pass_without_explanations_proposes_what_one_with_them_does(case: Case, spot_to_spot: bool,
                                                                      balanced: bool) -> None:
    """Without explanations single-node consolidation gives up on a replacement as soon as it is known to cost
    too much (`SimState.launch_floor`); the commands are those of the pass that places every pod (under
    consolidationPolicy Balanced too)."""
    pools = _pools(case, balanced)
    nodes = tuple(replace(n, labels={**n.labels, LABEL_INITIALIZED: "true"}) for n in case.snapshot.nodes)
    snapshot = replace(case.snapshot, nodes=nodes, nodepools=pools)
    explained = EngineOptions(spot_to_spot=spot_to_spot)
    quiet = EngineOptions(spot_to_spot=spot_to_spot, explain=False)
    full = run_pass(explained.view_of(snapshot, NOW), explained)
    fast = run_pass(quiet.view_of(snapshot, NOW), quiet)
    for command in full.commands:
        event(f"{command.method} {command.action}")
    assert fast.commands == full.commands
    assert fast.revisit_at == full.revisit_at
    # when nothing acted (a pass without explanations then says no more), a node the full pass finds no
    # replacement for is left alone with no replacement too
    causes = {b.node: b.cause for b in fast.blocked}
    for entry in full.blocked if not full.commands else ():
        inner = entry.cause.inner
        if inner is not None and inner.kind in (Cause.NO_CHEAPER_REPLACEMENT, Cause.SPOT_TO_SPOT_DISABLED):
            event(f"no replacement: {inner.kind.value}")
            assert causes[entry.node].kind == entry.cause.kind


@settings(max_examples=500, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(cases(max_nodes=10, max_pods=40, max_remove=0), st.booleans())
def test_single_node_verdicts_do_not_depend_on_explanations(case: Case, spot_to_spot: bool) -> None:
    """Every node's single-node consolidation verdict, with and without explanations: the same command, or no
    command, with the same reason the delete failed and, when it differs, a replacement known to cost too
    much."""
    nodes = tuple(replace(n, labels={**n.labels, LABEL_INITIALIZED: "true"}) for n in case.snapshot.nodes)
    snapshot = replace(case.snapshot, nodes=nodes)
    explained = EngineOptions(spot_to_spot=spot_to_spot)
    quiet = EngineOptions(spot_to_spot=spot_to_spot, explain=False)
    full_ctx = _context(explained.view_of(snapshot, NOW), explained)
    fast_ctx = _context(quiet.view_of(snapshot, NOW), quiet)
    for name in sorted(full_ctx.view.price):
        if not full_ctx.view.movable.get(name):
            continue
        full = single_node.evaluate(full_ctx, name)
        fast = single_node.evaluate(fast_ctx, name)
        if isinstance(full, BlockCause):
            event(f"full: {full.kind.value} {full.inner.kind.value if full.inner else ''}")
            assert isinstance(fast, BlockCause)
            # why the delete failed (why a new node did not take a pod either is said only with explanations)
            assert {k: v for k, v in fast.values.items() if k != "new"} == \
                {k: v for k, v in full.values.items() if k != "new"}
            assert not fast.values.get("new")
            if fast.kind != full.kind or fast.inner != full.inner:
                # it gave up on the replacement before a later pod found no room, or before the replacement was
                # filtered for another reason: it is too dear whatever else joins it
                assert fast.kind == Cause.NO_REPLACEMENT and fast.inner is not None
                assert fast.inner.kind in (Cause.NO_CHEAPER_REPLACEMENT, Cause.SPOT_TO_SPOT_DISABLED)
                event(f"fast: {fast.inner.kind.value} where full: {full.kind.value} "
                      f"{full.inner.kind.value if full.inner else ''}")
        else:
            event(f"full: {full.action}")
            assert fast == full
            assert fast.placements == full.placements


@settings(max_examples=600, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(cases(max_nodes=12, max_pods=40, max_remove=0))
def test_giving_up_on_a_dear_replacement_changes_no_command(case: Case) -> None:
    """Single-node consolidation, and a multi-node greedy step that joins a set, give up on a replacement once
    `SimState.launch_floor` shows it costs too much; with a floor of 0 they never do, and place every pod: the same
    commands either way."""
    pools = tuple(replace(p, budgets=(Budget(nodes="100%"),)) for p in case.snapshot.nodepools)
    nodes = tuple(replace(n, labels={**n.labels, LABEL_INITIALIZED: "true"}) for n in case.snapshot.nodes)
    snapshot = replace(case.snapshot, nodes=nodes, nodepools=pools)
    options = EngineOptions(explain=False)
    fast = run_pass(options.view_of(snapshot, NOW), options)
    with patch.object(SimState, "launch_floor", lambda self, b, without=None: 0.0):
        slow = run_pass(options.view_of(snapshot, NOW), options)
    for command in slow.commands:
        event(f"{command.method} {command.action}")
    assert fast.commands == slow.commands
    assert [c.placements for c in fast.commands] == [c.placements for c in slow.commands]


@settings(max_examples=1500, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(cases(max_nodes=12, max_pods=60, max_remove=0), st.booleans(), st.booleans())
def test_single_node_takes_multi_nodes_verdicts_on_nodes_alone_as_it_would_find_them(
        case: Case, spot_to_spot: bool, explain: bool) -> None:
    """Multi-node consolidation's greedy runs simulate each node on its own until they take one, on the state
    single-node consolidation starts from, and leave their verdicts (`PassContext.alone`); single-node
    consolidation then takes them instead of simulating those nodes again. Its outcome is the one it computes
    itself: the same commands (and placements) and, with explanations, the same causes; without them, the same
    reason the delete failed, and a replacement that does not fit or costs too much (the early stop may find the
    second where the full placement finds the first)."""
    pools = tuple(replace(p, budgets=(Budget(nodes="100%"),)) for p in case.snapshot.nodepools)
    nodes = tuple(replace(n, labels={**n.labels, LABEL_INITIALIZED: "true"}) for n in case.snapshot.nodes)
    snapshot = replace(case.snapshot, nodes=nodes, nodepools=pools)
    options = EngineOptions(spot_to_spot=spot_to_spot, explain=explain)
    shared = _context(options.view_of(snapshot, NOW), options)
    budgets = dict(shared.remaining)
    multi_node.run(shared)
    shared.remaining = dict(budgets)  # as when multi-node proposed nothing (else single-node does not run)
    event(f"verdicts taken from multi-node: {min(len(shared.alone), 3)}")
    taken = single_node.run(shared)
    # multi-node's merge search adds to a verdict the merge it tried with the node (`Cause.NO_MERGE`): the verdict
    # on the node alone is its inner cause
    taken.blocked = {name: cause.inner if cause.kind == Cause.NO_MERGE and cause.inner is not None else cause
                     for name, cause in taken.blocked.items()}
    alone = single_node.run(_context(options.view_of(snapshot, NOW), options))
    assert taken.commands == alone.commands
    assert [c.placements for c in taken.commands] == [c.placements for c in alone.commands]
    if explain:
        assert taken.blocked == alone.blocked
        return
    assert taken.blocked.keys() == alone.blocked.keys()
    for name, cause in taken.blocked.items():
        computed = alone.blocked[name]
        assert cause.values == computed.values
        if cause != computed:
            assert name in shared.alone
            assert {cause.kind, computed.kind} <= {Cause.PODS_FIT_NOWHERE, Cause.NO_REPLACEMENT}
            event("without explanations: another true cause")


@settings(max_examples=800, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(cases(max_nodes=12, max_pods=60, max_remove=0), st.booleans(), st.booleans())
def test_carrying_on_with_a_replacement_from_the_delete_only_run_changes_nothing(
        case: Case, spot_to_spot: bool, explain: bool) -> None:
    """Multi-node consolidation's delete-only run carries a step of a node on its own on with a replacement from
    its first pod without room (`multi_node._carry_on`), and the run with a replacement then skips that node's
    step on its own when it would not be taken: the pass is the one where the run with a replacement simulates
    every step itself, commands, placements and causes alike."""
    pools = tuple(replace(p, budgets=(Budget(nodes="100%"),)) for p in case.snapshot.nodepools)
    nodes = tuple(replace(n, labels={**n.labels, LABEL_INITIALIZED: "true"}) for n in case.snapshot.nodes)
    snapshot = replace(case.snapshot, nodes=nodes, nodepools=pools)
    options = EngineOptions(spot_to_spot=spot_to_spot, explain=explain)
    carried: list[bool] = []
    carry_on = multi_node._carry_on

    def recording(ctx: PassContext, name: str, leaving: list[Pod], first: str, kept: RefusalSession | None) -> bool:
        carried.append(carry_on(ctx, name, leaving, first, kept))
        return carried[-1]

    with patch.object(multi_node, "_carry_on", recording):
        quick = run_pass(options.view_of(snapshot, NOW), options)
    event(f"steps carried on and skipped: {min(sum(carried), 3)}")
    with patch.object(multi_node, "_carry_on", lambda ctx, name, leaving, first, kept: False):
        full = run_pass(options.view_of(snapshot, NOW), options)
    for command in full.commands:
        event(f"{command.method} {command.action}")
    assert quick.commands == full.commands
    assert [c.placements for c in quick.commands] == [c.placements for c in full.commands]
    assert quick.blocked == full.blocked
    assert quick.revisit_at == full.revisit_at
