"""Values shared by the disruption methods: what a method is, commands, blocked causes, and the pass context.

A `Method` is a name, the disruption reason its commands count against, whether it consolidates, how it
runs and how it re-checks one of its commands' nodes. It reads the `ClusterView` and a simulation state
and returns a `MethodOutcome`: the commands it would execute now and, for nodes it considered but did not
take, why, as a `BlockCause` (ebb.core.causes).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from ebb.core.balanced import Move, Score
from ebb.core.causes import BlockCause, Cause, StaleCause
from ebb.core.cluster import ClusterView
from ebb.core.conflicts import ConflictSettings
from ebb.core.methods.kept import KeptRefusals, waiting_for_uninitialized
from ebb.core.model import (
    CAPACITY_RESERVED,
    CAPACITY_SPOT,
    InstanceType,
    Node,
    NodePool,
    Pod,
    Requirement,
    Snapshot,
)
from ebb.core.simulator.constraints import Pool, type_values
from ebb.core.simulator.results import NewNode
from ebb.core.simulator.scheduler import Scheduler, SimState

EPSILON = 1e-9
SPOT_TO_SPOT_MIN_TYPES = 15  # Karpenter keeps at least 15 cheaper spot options to avoid churn
#: Karpenter's ``scheduling.MaxInstanceTypes`` (600 in v1.14.1): a disruption simulation keeps a new NodeClaim's
#: cheapest this many instance types (``SimulateScheduling`` -> ``Results.TruncateInstanceTypes``), and asks its
#: NodePool's ``minValues`` of those (`truncated`)
MAX_INSTANCE_TYPES = 600


def truncated(instance_types: Sequence[str]) -> tuple[str, ...]:
    """A new node's options (cheapest first) as Karpenter's disruption simulation keeps them: the cheapest
    `MAX_INSTANCE_TYPES` (``InstanceTypes.Truncate``)."""
    return tuple(instance_types[:MAX_INSTANCE_TYPES])


@dataclass(frozen=True, slots=True)
class Replacement:
    nodepool: str
    instance_types: tuple[str, ...]
    capacity_type: str
    zones: tuple[str, ...]
    price: float
    hostname: str = ""
    #: labels the node is launched with: the values its NodePool's custom requirements with several values take for
    #: the pods it is for (``key In [a, b]`` narrowed to ``b``), as Karpenter labels its NodeClaim
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Command:
    method: str
    reason: str
    action: str  # delete | replace
    nodes: tuple[str, ...]
    replacements: tuple[Replacement, ...]
    savings: float
    placements: dict[str, str] = field(default_factory=dict, compare=False)  # pod -> node or hostname
    explanation: str = ""


@dataclass
class MethodOutcome:
    commands: list[Command] = field(default_factory=list)
    blocked: dict[str, BlockCause] = field(default_factory=dict)


@dataclass(frozen=True)
class EngineOptions:
    spot_to_spot: bool = False
    explain: bool = True  # evaluate every consolidation candidate for "why not" reasons
    #: a node without a NodeClaim is not a candidate (`Cause.NO_NODECLAIM`): with the karpenter provider the
    #: executor retires a node by deleting its NodeClaim. The ClusterView is built with the same value
    #: (`view_of`)
    require_nodeclaim: bool = False
    #: Karpenter's pace: single-node consolidation makes at most one command a pass, as Karpenter's disruption
    #: loop acts on one node per iteration (ebb's own default takes every candidate the budget allows); multi-node
    #: consolidation is Karpenter's prefix search and its replacement Karpenter's (`filter_replacement`); the
    #: planner passes as that loop looks, at once after a command's validation, else every pass interval, not on a
    #: change. The back-test's simulations of Karpenter (``karpenter-default``, ``karpenter-balanced``) set it
    karpenter_pace: bool = False
    #: how many replacements one multi-node consolidation may launch: Karpenter's one by default. More lets a set
    #: of nodes be repacked onto several cheaper ones (`multi_node`), a move Karpenter never makes
    max_replacements: int = 1
    #: how multi-node consolidation searches for its set: ``greedy`` (grown in candidate order, `multi_node`) or
    #: ``optimizer`` (a linear program over every candidate, `ebb.core.methods.optimizer`, the delete-only greedy run
    #: when it finds no set); the merge search runs beside either. Karpenter's pace keeps Karpenter's own search
    #: whatever this says
    search: str = "greedy"
    #: the nodes of a NodePool that conflicts with Karpenter under these settings are not candidates
    #: (`Cause.KARPENTER_CONFLICT`, ``ebb.core.conflicts.refused``): the services and ``ebb plan`` set them (their
    #: mode is ``enforce``); None, refusing nothing, for the engine as a library (unit tests, back-tests of traces)
    refuse_conflicts: ConflictSettings | None = None

    def view_of(self, snapshot: Snapshot, now: datetime) -> ClusterView:
        """The ClusterView of ``snapshot`` at ``now`` that these options' passes and validations run on."""
        return ClusterView.build(snapshot, now, require_nodeclaim=self.require_nodeclaim,
                                 refuse_conflicts=self.refuse_conflicts)


#: `EngineOptions.search`'s values: multi-node consolidation's greedy runs (the default) or its optimizer search
SEARCH_GREEDY, SEARCH_OPTIMIZER = "greedy", "optimizer"
SEARCHES = (SEARCH_GREEDY, SEARCH_OPTIMIZER)


@dataclass
class PassContext:
    view: ClusterView
    options: EngineOptions
    scheduler: Scheduler
    state: SimState
    remaining: dict[tuple[str, str], int]  # (pool, reason) -> budget left in this pass
    excluded: frozenset[str] = frozenset()  # nodes an earlier command of this pass already takes
    #: the first pod of a node that found no room on the other nodes, and why, when the node's pods alone were
    #: placed on the state single-node consolidation starts from (multi-node's delete-only greedy run, before it
    #: took a node)
    no_room: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: why consolidating one of these nodes on its own saves nothing, found on that same state by multi-node's
    #: greedy run with a replacement (before it took a node): single-node consolidation's verdict on it, which
    #: `single_node.run` takes instead of evaluating the node again while it has kept no command
    alone: dict[str, BlockCause] = field(default_factory=dict)
    #: why multi-node consolidation's merge search refused the smallest set it tried that holds the node, and that
    #: set's size (the first that many candidates of the search): what single-node consolidation's verdict adds
    merges: dict[str, tuple[int, BlockCause]] = field(default_factory=dict)
    #: per NodePool with a demandWindow, the cpu and memory its nodes may still lose this pass
    #: (`ClusterView.headrooms`, less what this pass's earlier commands take)
    capacity_left: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: the consolidation moves the methods counted (`ebb.core.balanced.Move`), for the planner's metrics
    moves: list[Move] = field(default_factory=list)
    #: multi-node consolidation's last set a Balanced NodePool refused: its nodes and the scores
    balanced_refused: tuple[tuple[str, ...], list[Score]] | None = None
    #: what the caller's last pass found of nodes alone that consolidate neither way, for multi-node consolidation's
    #: greedy runs (`ebb.core.methods.kept.KeptRefusals`; none: every step simulated)
    refusals: KeptRefusals | None = None

    def __post_init__(self) -> None:
        if not self.capacity_left:
            self.capacity_left = self.view.headrooms()

    @property
    def now(self) -> datetime:
        return self.view.now

    def budget_left(self, pool: str, reason: str) -> int:
        return self.remaining.get((pool, reason), 0)

    def consume(self, pool: str, reason: str) -> None:
        self.remaining[(pool, reason)] = self.budget_left(pool, reason) - 1


#: schedulers whose pods never run on the cluster's nodes: EKS's Fargate scheduler gives each a Fargate node of its own
FOREIGN_SCHEDULERS = frozenset({"fargate-scheduler"})


def pending_pods(view: ClusterView) -> list[Pod]:
    """Pods waiting for a node: not bound, Pending, not being deleted, not DaemonSet or mirror pods, not held back by
    scheduling gates (no scheduler places one, and Karpenter provisions none: its PodScheduled reason is
    ``SchedulingGated``, not ``Unschedulable``), and not a scheduler's whose pods never run on the cluster's nodes
    (`FOREIGN_SCHEDULERS`)."""
    return [p for p in view.unbound  # the active pods on no node: a few of the snapshot's thousands
            if p.node_name is None and p.phase == "Pending" and p.needs_rescheduling and not p.deleting
            and not p.scheduling_gated and p.scheduler_name not in FOREIGN_SCHEDULERS]


def simulation(view: ClusterView) -> tuple[Scheduler, SimState]:
    """The scheduler and base state every pass, validation and finding starts from. Like Karpenter, whose
    disruption simulations (``SimulateScheduling``) schedule the pending pods and the pods of its deleting
    nodes along with a candidate's, capacity is first kept for the pending pods and for the pods about to be
    evicted from nodes that are going away (`ClusterView.evicted_soon`: deleting, or tainted by a disruption)
    that fit on an existing node: a disruption never counts on room such a pod is going to take. Those that
    fit nowhere are the provisioner's business and block nothing. They may go to an uninitialized node (a
    replacement on its way up is where they are headed); the pods a disruption moves may not, so
    uninitialized nodes are then set aside (Karpenter: "would schedule against uninitialized")."""
    pending = pending_pods(view)
    scheduler = Scheduler(view.snapshot, node_order=view.utilization_order(), extra_pods=pending,
                          derived=view.node_pods, unbound=view.unbound)
    state = scheduler.new_state()
    evicted = view.evicted_soon()
    state.lift(evicted)
    if pending or evicted:
        state.place_all([*pending, *evicted], max_new=0, explain=False)
    for name in view.uninitialized_owned():
        state.set_aside(name, "it is not initialized yet")
    return scheduler, state


@dataclass(frozen=True, slots=True)
class Method:
    """A disruption method, as the engine runs it and validation re-checks its commands."""

    #: the wire name (``Command.method``, ``blocked[].method``), e.g. "single-node-consolidation"
    name: str
    #: the disruption reason its commands count against: Expired, Drifted, Empty or Underutilized
    reason: str
    #: whether it consolidates (the do-not-consolidate annotation, holds, windows and consolidateAfter apply)
    consolidation: bool
    #: the commands it would execute now, and why it leaves the nodes it considered
    run: Callable[[PassContext], MethodOutcome]
    #: the method's own re-check of one node of its command against a fresher view (validation does the
    #: common ones: the node exists and is a candidate, budgets, the simulation); None while it still holds
    validate: Callable[[ClusterView, Node], StaleCause | None]


def budget_block(ctx: PassContext, pool: str, reason: str) -> BlockCause:
    verdict = ctx.view.budgets[(pool, reason)]
    if verdict.invalid:
        return BlockCause(Cause.BUDGET_INVALID, {"detail": verdict.detail})
    if verdict.allowed == 0:
        return BlockCause(Cause.BUDGET_ZERO, {"reason": reason, "detail": verdict.detail})
    return BlockCause(Cause.BUDGET_USED_UP, {"reason": reason, "pool": pool,
                                             "source": ctx.view.pools[pool].policy_source, "detail": verdict.detail})


def strictest_improvement(view: ClusterView, removed: Sequence[str]) -> NodePool | None:
    """ebb's churn control: of the removed nodes' NodePools, the one whose ``minimumPriceImprovementPercent`` asks the
    most of what replaces them (it decides); None when none asks any."""
    strictest = max((view.pools[p] for p in {view.nodes[n].nodepool or "" for n in removed} if p in view.pools),
                    key=lambda p: (p.minimum_price_improvement_percent, p.name), default=None)
    return strictest if strictest is not None and strictest.minimum_price_improvement_percent else None


def improvement_refused(strictest: NodePool, launched: str, best: float, removed_price: float) -> BlockCause:
    """Why what would replace nodes costing ``removed_price`` is refused: at ``best`` (``launched`` says what costs
    that) it saves less than ``strictest``'s ``minimumPriceImprovementPercent``."""
    return BlockCause(Cause.PRICE_IMPROVEMENT_TOO_SMALL, {
        "source": strictest.policy_source, "percent": strictest.minimum_price_improvement_percent,
        "launched": launched, "best": best, "price": removed_price,
        "improvement": 100 * (1 - best / removed_price) if removed_price else 0.0})


def reserved_first(state: SimState, new: NewNode) -> NewNode:
    """``new`` as Karpenter's NodeClaim launches it: narrowed to its reserved offerings when it has one (its scheduler
    reserves them, and ``FinalizeScheduling`` narrows the NodeClaim to reserved whatever they cost), for every method
    that launches a replacement."""
    _, reserved = state.claim_capacity_types(new.hostname)
    if reserved:  # narrowed even when its cheapest option is reserved already: its other options may not be
        return state.launched_as(new.hostname, CAPACITY_RESERVED) or new
    return new


def as_launched(state: SimState, new: NewNode) -> NewNode:
    """``new`` as a replacement launches it (`reserved_first`), its options narrowed to the capacity type of its
    cheapest one: a replacement is launched as that capacity type alone (`ebb.core.launch.launch_spec`, the
    NodeClaim's requirement), so a type offered only as another is no option of it. Its price stays its cheapest
    option's. For the replacements of expiration and drift, whose simulation keeps every capacity type; what decides
    whether they can be launched (``minValues``) is asked of the options before they are narrowed."""
    new = reserved_first(state, new)
    if new.capacity_type == CAPACITY_RESERVED:
        return new
    return state.launched_as(new.hostname, new.capacity_type) or new


def no_cheaper_replacement(view: ClusterView, removed: Iterable[str], new: NewNode | None, needed: float,
                           price: float) -> BlockCause:
    """`Cause.NO_CHEAPER_REPLACEMENT`: the pods of ``removed`` need a node costing ``needed``, the nodes cost
    ``price``; when some of them that ``new`` holds have volumes that keep it to its zones, those are named (the
    cheaper types may be offered elsewhere only), and so is a replacement narrowed to reserved capacity (a reserved
    offering holds the pods, and it is taken whatever other types cost), and, with several NodePools, the one the
    replacement comes from (the first by weight that can launch a node holding the pods: another's cheaper types are
    no option)."""
    asides: list[str] = []
    if new is not None and new.zones:
        held = set(new.pods)
        if any(p.spec.volume_terms is not None for n in removed for p in view.movable[n] if p.key in held):
            asides.append(f"in {', '.join(new.zones)}, where its pods' volumes can be attached")
    if new is not None and new.capacity_type == CAPACITY_RESERVED:  # `reserved_first`: whatever cheaper types cost
        asides.append("as the reserved capacity that holds them, which a replacement takes first, as Karpenter's "
                      "launch does")
    pool = view.pools.get(new.nodepool) if new is not None else None
    if pool is not None and len(view.pools) > 1:  # a cheaper type of a NodePool further down the order is no option
        asides.append(f"from NodePool {pool.name}, the first by weight ({pool.weight}) that can launch a node holding "
                      "them (a heavier one may be past its limits, static, not Ready or being deleted), as "
                      "Karpenter's scheduler takes a new node from the first NodePool that fits")
    where = {"where": ", ".join(asides)} if asides else {}
    return BlockCause(Cause.NO_CHEAPER_REPLACEMENT, {"needed": needed, "price": price, **where})

def filter_replacement(new: NewNode, removed: list[str], ctx: PassContext) -> Replacement | BlockCause:
    """Keep only replacement options cheaper than what is removed, dropping options of the same type as
    a removed node that cost at least as much; keep the NodePool's ``minValues`` (the options left must still
    offer that many distinct values of each such label, or there is no replacement: Karpenter's
    ``RemoveInstanceTypeOptionsByPriceAndMinValues``, which consolidation never relaxes), of the cheapest
    `MAX_INSTANCE_TYPES` options only, which must offer them too (the simulation's `truncated` NodeClaim, before
    any price filter: Karpenter's ``Truncate``, which leaves the pods unscheduled when they do not); enforce the
    spot-to-spot rule (a spot replacement of nodes that are all spot needs spot-to-spot enabled, and for a single
    node 15 cheaper types, its options then cut to the 15 cheapest, or to as many as ``minValues`` needs if more). With
    ``EngineOptions.karpenter_pace`` a replacement of several nodes loses every option as dear as a removed node
    whose type it could be (Karpenter's ``filterOutSameInstanceType``, `_same_type_ceiling`), and there is none for
    a pod a node not initialized yet has room for (`uninitialized_room`). Returns the replacement, or why there is
    none."""
    view = ctx.view
    if ctx.options.karpenter_pace:
        waiting = uninitialized_room(ctx.state, new, view.uninitialized_owned())
        if waiting is not None:
            return waiting_for_uninitialized(*waiting)
    pool = compiled_pool(ctx, new.nodepool)
    kept_types: frozenset[str] | None = None  # the simulation's NodeClaim's types, when it has more than it keeps
    if len(new.instance_types) > MAX_INSTANCE_TYPES:
        refused = min_values_refused(pool, new.instance_types)
        if refused is not None:
            return refused
        kept_types = frozenset(truncated(new.instance_types))
    all_spot = all(view.nodes[n].capacity_type == CAPACITY_SPOT for n in removed)
    may_be_spot, reserved = ctx.state.claim_capacity_types(new.hostname)
    if reserved:
        new = reserved_first(ctx.state, new)  # and not the spot-to-spot path's
    elif all_spot and may_be_spot:
        # Karpenter's spot-to-spot path (computeConsolidation): nodes that are all spot, replaced by a node whose
        # requirements allow spot, are replaced by spot or not at all, whatever the cheapest offering is and whether
        # a spot one is available now
        if not spot_to_spot(ctx, new.nodepool):
            return BlockCause(Cause.SPOT_TO_SPOT_DISABLED)
        if new.capacity_type != CAPACITY_SPOT:
            spot = ctx.state.launched_as(new.hostname, CAPACITY_SPOT)
            if spot is None:
                return BlockCause(Cause.NO_SPOT_OFFERING)
            new = spot
    removed_price = sum(view.price[n] for n in removed)
    floors = min_values_floors(pool)
    prices: dict[str, float] = {}
    worst: dict[str, float] = {}  # type -> its dearest offering the replacement may take (Karpenter's WorstLaunchPrice)
    values: dict[str, dict[str, set[str]]] = {}  # type -> minValues key -> its values (Karpenter: the type's own)
    for combo in range(len(pool.combo_type)):
        itype = pool.types[int(pool.combo_type[combo])]
        name = itype.name
        if name in new.instance_types and pool.combo_ct[combo] == new.capacity_type \
                and pool.combo_zone[combo] in new.zones:
            prices[name] = min(prices.get(name, float("inf")), float(pool.combo_price[combo]))
            worst[name] = max(worst.get(name, 0.0), float(pool.combo_price[combo]))
            if floors and name not in values:
                values[name] = _floor_values(itype, floors)
    # a removed node's type -> the cheapest removed node of it (a spot and an on-demand node of one type: the spot's
    # price, whatever order they come in)
    same_type: dict[str | None, float] = {}
    for n in removed:
        itype_name = view.nodes[n].instance_type
        same_type[itype_name] = min(view.price[n], same_type.get(itype_name, float("inf")))

    def kept(t: str) -> bool:  # not a copy of a removed node at its price or more
        return not (t in same_type and prices[t] >= same_type[t] - EPSILON)

    launchable = new.instance_types if kept_types is None else [t for t in new.instance_types if t in kept_types]
    priced = [t for t in launchable if prices.get(t, float("inf")) < removed_price - EPSILON]
    options = [t for t in priced if kept(t)]
    ceiling = float("inf")
    if ctx.options.karpenter_pace and len(removed) > 1:
        ceiling = _same_type_ceiling(view, removed, priced, prices)
        options = [t for t in options if prices[t] < ceiling - EPSILON]
    if not options:
        needed = new.price
        copies = [t for t in priced if not kept(t)]
        if copies:  # the cheaper ones are a removed node's type: keeping that node does as well (no merge)
            cheapest = min(copies, key=lambda t: (prices[t], t))
            node = min((n for n in removed if view.nodes[n].instance_type == cheapest), key=lambda n: view.price[n])
            return BlockCause(Cause.ONLY_SAME_TYPE_CHEAPER, {"type": cheapest, "cheapest": prices[cheapest],
                                                              "price": removed_price, "node": node})
        if needed < removed_price - EPSILON:
            # every cheaper option was left out (a copy of a removed node): what the pods need is then the cheapest of
            # the others, no less than what the nodes cost
            needed = max(removed_price, min((prices[t] for t in launchable
                                             if t in prices and kept(t) and prices[t] < ceiling - EPSILON),
                                            default=removed_price))
        return no_cheaper_replacement(view, removed, new, needed, removed_price)
    strictest = strictest_improvement(view, removed)
    if strictest is not None:
        percent = strictest.minimum_price_improvement_percent
        best = min(prices[t] for t in options)
        options = [t for t in options if prices[t] <= removed_price * (1 - percent / 100) + EPSILON]
        if not options:
            return improvement_refused(strictest, "cheapest replacement costs", best, removed_price)
    options.sort(key=lambda t: (prices[t], t))
    # spot-to-spot is Karpenter's case only when every removed node is spot (enabled: checked above); the 15 cheaper
    # types are asked of a single node only ("For multi-node consolidation ... we exit early", consolidation.go)
    spot_single = new.capacity_type == CAPACITY_SPOT and all_spot and len(removed) == 1
    if spot_single:
        # the cheaper types Karpenter counts (and launches from) there are those whose every spot offering the
        # replacement may take costs less than the node (``RemoveInstanceTypeOptionsByPriceAndMinValues`` keeps a type
        # whose ``WorstLaunchPrice`` is below it): not a type cheaper in some of those zones only, so not the node's own
        # type where the replacement may take it in the node's zone, at the node's price, however cheap it is elsewhere
        options = [t for t in options if worst[t] < removed_price - EPSILON]
    needed = len(options)
    if floors:
        needed, short = min_values_prefix(options, values, floors)
        if short:
            return min_values_not_met(short, floors, "cheaper instance types")
    if spot_single:
        if len(options) < SPOT_TO_SPOT_MIN_TYPES:
            return BlockCause(Cause.SPOT_TO_SPOT_TOO_FEW_TYPES, {"minimum": SPOT_TO_SPOT_MIN_TYPES,
                                                                 "found": len(options)})
        # launch from the cheapest few only, so the type the cloud picks is never itself worth replacing
        # again at once (Karpenter: "so we don't get into a continual consolidation situation")
        options = options[:max(SPOT_TO_SPOT_MIN_TYPES, needed if floors else 0)]
    return Replacement(new.nodepool, tuple(options), new.capacity_type, new.zones, prices[options[0]],
                       new.hostname, new.labels)


def launch_refused(ctx: PassContext, nodepool: str, instance_types: Sequence[str], *,
                   truncate: bool = True) -> BlockCause | None:
    """Why a replacement in NodePool ``nodepool`` whose options are ``instance_types`` (cheapest first) cannot be
    launched: they do not offer the values its requirements' ``minValues`` ask (Karpenter's ``Truncate``,
    ``SatisfiesMinValues``: the pods of such a NodeClaim do not schedule, MinValuesPolicy Strict); None when they do,
    or nothing asks any. Expiration and drift ask it of every replacement (`ebb.core.methods.rotation`);
    consolidation of what it keeps of the options (`filter_replacement`). ``truncate``: of the cheapest
    `MAX_INSTANCE_TYPES` of them only, as a disruption simulation keeps a NodeClaim's (`min_values_refused`)."""
    return min_values_refused(compiled_pool(ctx, nodepool), instance_types, truncate=truncate)


def min_values_refused(pool: Pool, instance_types: Sequence[str], *, truncate: bool = True) -> BlockCause | None:
    """`launch_refused` of the compiled NodePool ``pool``: why ``instance_types`` (cheapest first; with ``truncate``
    the cheapest `MAX_INSTANCE_TYPES` of them, `truncated`) fall short of its ``minValues``, or None."""
    floors = min_values_floors(pool)
    if not floors:
        return None
    options = "instance types its replacement could launch as"
    if truncate and len(instance_types) > MAX_INSTANCE_TYPES:
        instance_types = truncated(instance_types)
        options = f"{MAX_INSTANCE_TYPES} cheapest {options}"
    types = {itype.name: itype for itype in pool.types}
    values = {name: _floor_values(types[name], floors) for name in instance_types if name in types}
    _, short = min_values_prefix(instance_types, values, floors)
    return min_values_not_met(short, floors, options) if short else None


def min_values_floors(pool: Pool) -> list[Requirement]:
    """The compiled NodePool's requirements that have ``minValues``."""
    return [r for r in pool.pool.requirements if r.min_values is not None]


def min_values_not_met(short: Mapping[str, int], floors: Sequence[Requirement], options: str) -> BlockCause:
    """`Cause.MIN_VALUES_NOT_MET`: the ``options`` (what they are, e.g. "cheaper instance types") reach only ``short``
    (label -> the values they offer, `min_values_prefix`) of the ``floors``."""
    return BlockCause(Cause.MIN_VALUES_NOT_MET, {
        "labels": "[" + " ".join(sorted(short)) + "]", "options": options,
        "found": ", ".join(f"{short[r.key]} value(s) of {r.key} where minValues is {r.min_values}"
                           for r in floors if r.key in short)})


def compiled_pool(ctx: PassContext, name: str) -> Pool:
    """NodePool ``name`` as the pass's scheduler compiled it."""
    pool = ctx.scheduler.pool_named(name)
    if pool is None:
        raise KeyError(name)  # a new node's NodePool is always the snapshot's
    return pool


def spot_to_spot(ctx: PassContext, pool: str) -> bool:
    """Whether a spot replacement of spot nodes may launch in NodePool ``pool``: ebb's option or the NodePool's."""
    return ctx.options.spot_to_spot or ctx.view.pools[pool].spot_to_spot


def may_launch_spot(ctx: PassContext, new: NewNode) -> bool:
    """Whether the replacement ``new`` may be spot (`SimState.claim_capacity_types`): its NodePool's requirements and
    its pods' allow a spot node, and it takes no reserved offering. Then Karpenter sends nodes that are all spot down
    its spot-to-spot path (``computeConsolidation``: their replacement's requirements have spot), which replaces them
    by spot when spot-to-spot consolidation is enabled and never otherwise, whatever the cheapest offering is and
    whether a spot offering is available now; only a replacement that cannot be spot is priced as any other
    (`filter_replacement`)."""
    may_be_spot, reserved = ctx.state.claim_capacity_types(new.hostname)
    return may_be_spot and not reserved


def uninitialized_room(state: SimState, new: NewNode, uninitialized: Sequence[str]) -> tuple[str, str] | None:
    """A pod the simulation put on the new node ``new`` that one of the ``uninitialized`` nodes (Karpenter's, not
    initialized yet: `simulation` sets them aside) has room for (resources, selectors and tolerations), and that
    node; None when there is none.
    Karpenter's scheduler tries the initialized nodes, then the uninitialized ones, then new NodeClaims
    (``sortExistingNodes``), and a consolidation whose pod lands on an uninitialized node is refused
    (``UninitializedNodeError``, ``SimulateScheduling``): there is no replacement for such a pod."""
    if not uninitialized:
        return None
    claim = next((b for b, c in state.claims.items() if c.hostname == new.hostname), None)
    if claim is None:
        return None
    found = state.first_with_room(state.pods_on_bin(claim), [state.s.node_index[name] for name in uninitialized])
    return None if found is None else (found[0].key, state.s.nodes[found[1]].name)


def _same_type_ceiling(view: ClusterView, removed: Sequence[str], priced: Sequence[str],
                       prices: Mapping[str, float]) -> float:
    """Karpenter's rule for a multi-node replacement (``filterOutSameInstanceType``, multinodeconsolidation.go): when
    an instance type it could launch for less than the removed nodes cost (``priced``) is the type of a removed node,
    keeping that node and deleting the others would do as well with fewer pods moved, so no option may cost as much
    as the cheapest such node, whatever its type. That price (infinity when no such type is offered)."""
    cheapest: dict[str, float] = {}  # a removed node's type -> the cheapest removed node of it
    for name in removed:
        itype = view.nodes[name].instance_type
        if itype is not None:
            cheapest[itype] = min(view.price[name], cheapest.get(itype, float("inf")))
    return min((cheapest[t] for t in priced if t in cheapest and t in prices), default=float("inf"))


def _floor_values(itype: InstanceType, floors: Sequence[Requirement]) -> dict[str, set[str]]:
    """The values of each floor's label that ``itype`` offers (`type_values`)."""
    return {req.key: type_values(req.key, itype) for req in floors}


def min_values_prefix(options: Sequence[str], values: Mapping[str, Mapping[str, set[str]]],
                      floors: Sequence[Requirement]) -> tuple[int, dict[str, int]]:
    """How many of ``options`` (cheapest first) it takes to offer each floor's ``minValues`` distinct values of its
    label, and the labels still short after all of them (with the count they reach): Karpenter's
    ``InstanceTypes.SatisfiesMinValues``."""
    seen: dict[str, set[str]] = {req.key: set() for req in floors}
    short: dict[str, int] = {}
    for index, name in enumerate(options):
        for req in floors:
            seen[req.key].update(values.get(name, {}).get(req.key, ()))
        short = {req.key: len(seen[req.key]) for req in floors if len(seen[req.key]) < (req.min_values or 0)}
        if not short:
            return index + 1, {}
    return len(options), short


def leaving(view: ClusterView, state: SimState, names: Sequence[str]) -> tuple[list[Pod], list[Pod]]:
    """Take ``names`` out of ``state``: the pods that need a new home, and the pods that stay until their node's
    terminationGracePeriod deadline (a do-not-disrupt or a PDB that blocks every eviction keeps them; only drift and
    expiration take such a node, `ClusterView.grace_period`). Karpenter's ``SimulateScheduling`` makes room for
    the first only (``IsCurrentlyReschedulable``). Among the held, a DaemonSet or mirror pod whose do-not-disrupt
    protects it now: no home is sought for it, and it too stays until the deadline."""
    moved: list[Pod] = []
    held: list[Pod] = []
    for name in names:
        for pod in state.remove_node(name):
            (moved if view.currently_reschedulable(pod) else held).append(pod)
        held.extend(pod for pod in view.node_pods[name].protected
                    if not (pod.needs_rescheduling or pod.is_terminal or pod.deleting) and view.protected_now(pod))
    return moved, held


def held_words(held: Sequence[Pod]) -> str:
    """What an explanation says of ``held`` (`leaving`): "" when there are none."""
    if not held:
        return ""
    shown = ", ".join(p.key for p in held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
    return (f"; left in place, as nothing may evict them now: {shown} (deleted at their node's "
            "terminationGracePeriod deadline unless evicted before)")


def placements_of(state: SimState, pods: list[Pod]) -> dict[str, str]:
    return {p.key: state.bin_name(state.placed[p.key]) for p in pods if p.key in state.placed}
