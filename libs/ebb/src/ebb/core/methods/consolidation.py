"""Who may be consolidated at all: the gate shared by emptiness and the two consolidation methods.

A node passes when nothing blocks it (do-not-disrupt, PDBs, do-not-consolidate, ...), its NodePool's
consolidateAfter is not Never, no hold or stabilization window pauses it, it has been stable for
consolidateAfter, and the budget for the reason has room. `still_consolidatable` is the same timing
re-checked when a consolidation command is validated. The pods a consolidation moves do not go to a node
that is itself inside its consolidateAfter (`set_aside_unsettled`, Karpenter v1.14's destination rule). Both
consolidation methods give up on a replacement being filled as soon as it costs too much whatever else joins it
(`give_up_when_dear`).

A NodePool with a ``demandWindow`` keeps capacity for its demand: no consolidation (and no empty node's
delete) may leave its nodes with less cpu or memory than its pods requested at their peak within the window
(`capacity_lost`, `demand_block`); a command's replacement gives back what it holds. A pass's commands take
from the same room, as they take from the budget.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from ebb.core.causes import BlockCause, Cause, Stale, StaleCause, short_of
from ebb.core.cluster import ClusterView
from ebb.core.methods.base import EPSILON, Command, MethodOutcome, PassContext, budget_block, spot_to_spot
from ebb.core.methods.kept import RefusalSession
from ebb.core.model import CAPACITY_SPOT, LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_ZONE, Node, NodePool, Pod
from ebb.core.simulator.scheduler import SimState

REASON = "Underutilized"
#: the labels a node's price is looked up by; Karpenter's consolidation leaves a node without one of them alone
#: ("Node does not have label", an Unconsolidatable event): it could not compare the node's price (emptiness needs
#: no price and still takes such a node)
PRICE_LABELS = (LABEL_INSTANCE_TYPE, LABEL_CAPACITY_TYPE, LABEL_ZONE)


def gate(ctx: PassContext, node: Node, pool: NodePool, reason: str) -> BlockCause | None:
    """Why the node may not be consolidated now, or None (a budget cause when only the budget stops it)."""
    view = ctx.view
    blocked = view.blocked_reason(node.name, consolidation=True)
    if blocked:
        return blocked
    if pool.consolidate_after is None:
        return BlockCause(Cause.CONSOLIDATE_AFTER_NEVER, {"pool": pool.name, "source": pool.policy_source})
    paused = view.paused(node)
    if paused:
        return BlockCause(Cause.PAUSED, inner=paused)
    not_yet = view.stable_for(node, pool.consolidate_after)
    if not_yet:
        return not_yet
    if ctx.budget_left(pool.name, reason) <= 0:
        return budget_block(ctx, pool.name, reason)
    return None


def still_consolidatable(view: ClusterView, node: Node) -> StaleCause | None:
    """Validation's re-check of a consolidation command's node: not paused, consolidateAfter not Never and
    still reached."""
    pool = view.pools[node.nodepool or ""]
    paused = view.paused(node)
    if paused:
        return StaleCause(Stale.CONSOLIDATION_PAUSED, {"node": node.name}, paused)
    if pool.consolidate_after is None:
        return StaleCause(Stale.CONSOLIDATE_AFTER_NOW_NEVER, {"pool": pool.name, "source": pool.policy_source})
    not_yet = view.stable_for(node, pool.consolidate_after)
    if not_yet:
        return StaleCause(Stale.NODE_CHANGED, {"node": node.name}, not_yet)
    return None


def capacity_lost(view: ClusterView, removed: Iterable[str],
                  launched: Iterable[tuple[str, str]] = ()) -> dict[str, tuple[int, int]]:
    """Per NodePool with a ``demandWindow``, the cpu and memory for pods its nodes lose when the ``removed`` nodes go
    and the ``launched`` ones ((NodePool, instance type): a command's replacements, each as its cheapest type)
    come: a node's `ClusterView.room_of`, a launch's allocatable less the DaemonSets that would run on it. Empty
    when no NodePool has a window."""
    peaks = view.demand_peak
    if not peaks:
        return {}
    lost: dict[str, tuple[int, int]] = {}
    for name in removed:
        pool = view.nodes[name].nodepool or ""
        if pool in peaks:
            cpu, memory = lost.get(pool, (0, 0))
            room = view.room_of(name)
            lost[pool] = (cpu + room[0], memory + room[1])
    for pool, type_name in launched:
        launch = view.launch_room(pool, type_name) if pool in peaks else None
        if launch is None:
            continue
        cpu, memory = lost.get(pool, (0, 0))
        lost[pool] = (cpu - launch[0], memory - launch[1])
    return lost


def command_capacity_lost(view: ClusterView, command: Command) -> dict[str, tuple[int, int]]:
    """`capacity_lost` by ``command``: its nodes go, its replacements (their cheapest type) come."""
    return capacity_lost(view, command.nodes, [(r.nodepool, r.instance_types[0]) for r in command.replacements])


def demand_block(view: ClusterView, left: Mapping[str, tuple[int, int]], lost: Mapping[str, tuple[int, int]],
                 action: str) -> BlockCause | None:
    """Why losing ``lost`` would take a NodePool's nodes below the peak its ``demandWindow`` keeps room for, when
    they may lose only ``left`` (`PassContext.capacity_left`); None when it would not."""
    for pool, (cpu, memory) in sorted(lost.items()):
        room = left[pool]
        if (cpu > 0 and cpu > room[0]) or (memory > 0 and memory > room[1]):
            peak = view.demand_peak[pool]
            spec = view.pools[pool]
            after = (peak[0] + room[0] - cpu, peak[1] + room[1] - memory)
            return BlockCause(Cause.DEMAND_WINDOW, {
                "source": spec.policy_source, "window": spec.demand_window, "action": action,
                "peak": _cpu_memory(peak), "after": _cpu_memory(after, peak)})
    return None


def _cpu_memory(amounts: tuple[int, int], peak: tuple[int, int] | None = None) -> str:
    """Cpu and memory as the demandWindow's sentence writes them, both even at 0 ("cpu 0m, memory 0.00Gi"); a
    capacity whose memory falls short of the ``peak`` gets the decimals it needs not to read as holding it."""
    gib = 2**30
    memory = (short_of(amounts[1] / gib, peak[1] / gib, 2) if peak is not None and amounts[1] < peak[1]
              else f"{amounts[1] / gib:.2f}")
    return f"cpu {amounts[0]}m, memory {memory}Gi"


def take_capacity(ctx: PassContext, lost: Mapping[str, tuple[int, int]]) -> None:
    """Count a command's `capacity_lost` against the room the pass has left (`PassContext.capacity_left`)."""
    for pool, (cpu, memory) in lost.items():
        room = ctx.capacity_left[pool]
        ctx.capacity_left[pool] = (room[0] - cpu, room[1] - memory)


def set_aside_unsettled(view: ClusterView, state: SimState) -> int:
    """Set aside, in ``state``, the nodes a consolidation may not move pods onto (`ClusterView.unsettled`: inside
    their consolidateAfter), as Karpenter's consolidation simulations do (``IsConsolidationSimulation``); the pods
    already placed there (pending pods, pods leaving deleting nodes) stay, and a candidate's pod still in phase
    Pending (bound, its containers not started) may still go there, as Karpenter's scheduler exempts a Pending pod.
    Returns the mark to roll back to."""
    mark = state.mark()
    for name, why in view.unsettled():
        state.set_aside(name, why, _bound_pending)
    return mark


def _bound_pending(pod: Pod) -> bool:
    """A pod bound to a node but still in phase Pending (`set_aside_unsettled`)."""
    return pod.phase == "Pending" and pod.node_name is not None


def candidates(ctx: PassContext, out: MethodOutcome) -> list[str]:
    """Underutilized candidates in disruption-cost order (with ``EngineOptions.karpenter_pace``, Karpenter v1.14's:
    price per unit of disruption, the highest first); excluded ones get their cause in `out`."""
    view = ctx.view
    names: list[str] = []
    closed = view.no_pool_launches()  # no NodePool may open a node: no move is simulated
    for node in view.snapshot.nodes:
        name = node.name
        if not view.movable[name] or name in view.not_candidate or name in ctx.excluded:
            continue
        pool = view.pools[node.nodepool or ""]
        if (pool.consolidation_policy == "WhenEmpty" or pool.consolidate_after is None) \
                and not view.blocked_reason(name, True):
            # the NodePool's policy keeps every node of it: said before what this node lacks
            out.blocked[name] = BlockCause(Cause.CONSOLIDATION_POLICY, {
                "pool": pool.name, "source": pool.policy_source, "policy": pool.consolidation_policy}
            ) if pool.consolidation_policy == "WhenEmpty" else BlockCause(Cause.CONSOLIDATE_AFTER_NEVER, {
                "pool": pool.name, "source": pool.policy_source})
            continue
        if not all(map(node.labels.get, PRICE_LABELS)):  # asked in C of most nodes: they have every one
            missing = next(label for label in PRICE_LABELS if not node.labels.get(label))
            if not view.blocked_reason(name, True):
                out.blocked[name] = BlockCause(Cause.PRICE_UNKNOWN, {"label": missing})
                continue
        if not view.price_known[name] and not view.blocked_reason(name, True):
            # Karpenter's consolidation leaves a candidate whose instance type it does not know (``ShouldDisrupt``)
            out.blocked[name] = BlockCause(Cause.TYPE_NOT_IN_CATALOG, {"type": node.instance_type})
            continue
        why = gate(ctx, node, pool, REASON) or closed
        if why:
            out.blocked[name] = why
            continue
        names.append(name)
    if ctx.options.karpenter_pace:
        return karpenter_order(view, names)
    return view.order(names)


def karpenter_order(view: ClusterView, names: list[str]) -> list[str]:
    """``names`` in Karpenter v1.14's candidate order (``sortCandidates``): the most savings per disruption first
    (``SavingsRatio``: the price over 1 plus each pod's eviction cost that is above 0), then by name."""
    return sorted(names, key=lambda n: (-view.price[n] / (1.0 + view.node_pods[n].positive_eviction_cost), n))


class NoCheaperLaunch(Exception):
    """The replacement being filled already costs too much, whatever else joins it: the cause to report."""

    def __init__(self, cause: BlockCause) -> None:
        super().__init__(cause.kind.value)
        self.cause = cause


def kept_refusals(ctx: PassContext) -> RefusalSession | None:
    """The refusals of nodes alone kept by the caller (`PassContext.refusals`) that hold on the state now
    (`ebb.core.methods.kept`), with what else decides a refusal: the engine options and each NodePool's spot-to-spot
    setting; None without a keeper. At Karpenter's pace (`EngineOptions.karpenter_pace`) a replacement is refused
    for a pod a node not initialized yet has room for (`uninitialized_room`): a refused replacement holds only while
    none of them has room for its pods."""
    if ctx.refusals is None:
        return None
    return ctx.refusals.on(ctx.state, (ctx.options, tuple(sorted(
        (pool, settings.spot_to_spot) for pool, settings in ctx.view.pools.items()))),
        ctx.view.uninitialized_owned() if ctx.options.karpenter_pace else ())


def give_up_when_dear(ctx: PassContext, allowed: float, spot: bool) -> Callable[[int], None]:
    """The check run each time a pod joins a replacement (`SimState.place_all`'s ``on_claim``): raise
    `NoCheaperLaunch` once no type the claim keeps launches for less than ``allowed`` (what the nodes it replaces
    cost, less any saving the command must beat), which `filter_replacement` or the caller's own check would then
    refuse (a claim's launch floor only grows as pods join it). When every node it replaces is spot (``spot``) and
    its NodePool has spot-to-spot off, only offerings other than spot count: a spot replacement is refused as it
    is."""
    state = ctx.state

    def check(b: int) -> None:
        spot_refused = spot and not spot_to_spot(ctx, state.s.pools[state.claims[b].pool].pool.name)
        if spot_refused and state.launch_floor(b, without=CAPACITY_SPOT) < allowed - EPSILON:
            return  # the floor of every offering is no higher: nothing to give up on (one floor computed, not two)
        floor = state.launch_floor(b)
        if floor >= allowed - EPSILON:
            raise NoCheaperLaunch(BlockCause(Cause.NO_CHEAPER_REPLACEMENT, {"needed": floor, "price": allowed}))
        if spot_refused:  # its non-spot floor is too dear (above), and a spot replacement is refused
            raise NoCheaperLaunch(BlockCause(Cause.SPOT_TO_SPOT_DISABLED))

    return check


def give_up_on_replacing(ctx: PassContext, name: str) -> Callable[[int], None]:
    """`give_up_when_dear` for the replacement of ``name``: no cheaper than the node (a spot node, when
    spot-to-spot is off, only by something else than spot)."""
    return give_up_when_dear(ctx, ctx.view.price[name], ctx.view.nodes[name].capacity_type == CAPACITY_SPOT)
