"""Why a node is not disrupted, and why a decided command went stale, as values rather than sentences.

The ClusterView, the disruption methods and the engine say why they leave a node alone with a
`BlockCause`: a `Cause` (the kind of reason) and the values its sentence is made from; a cause that
qualifies another one (``empty, but <why>``, ``expired ..., but <why>``) holds it as `inner`. Validation
says why a command it re-checked is stale with a `StaleCause` (a `Stale` kind, values, `inner`) in the same
way. Consumers decide by the kind: `ebb.core.events.classify` picks the Kubernetes Event from it, the
engine tells a node that waits only for its budget by it. The sentence is written by `render`, from one
table of templates (`SENTENCES`, `STALE_SENTENCES`), only when a sentence is wanted: ``ebb plan``'s
``blocked[].reason``, an Event's message, a rejected decision's reason. Nothing reads a sentence back.

Templates use `str.format` fields with a few named formats of ebb's own: ``{x:time}`` (RFC 3339, UTC),
``{x:duration}`` (``1h30m``), ``{x:ago}`` (``5m ago``, or ``5m after now`` for a time ahead of the clock),
``{x:and}`` (a tuple joined with " and "), ``{x:new_nodes}`` (a count: ``no new node``, ``1 new node``, ``2 new
nodes``) and ``{x:hold}`` (a Hold, as ``hold NAME (SCOPE TARGET) until TIME: REASON``). A figure refused for
falling short of a threshold is written ``{x:.2f_below_y}``: ``.2f``, with more decimals while so few would round
it up to the threshold ``y`` (29.99 against 30 reads ``29.99``, not ``30.0``), so a refused figure never reads as
meeting it (`short_of`). Pure: values in, text out.

A sentence that quotes a disruption setting (consolidationPolicy, consolidateAfter, stabilizationWindow,
a budget, expireAfter) names the object it comes from, ``{source}``: ``NodePool X`` for the NodePool's own
spec.disruption, ``DisruptionPolicy X`` when an ebb.sh/v1 DisruptionPolicy governs the pool
(`ebb.core.model.NodePool.policy_source`). The one sentence that did not name a NodePool before
(consolidateAfter not yet passed) names only a DisruptionPolicy (``{whose}``), so explanations of clusters
without DisruptionPolicies read as they always did.
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from ebb.core.model import Hold
from ebb.core.quantity import dollars, fmt_time, format_duration


class Cause(StrEnum):
    """Why a pass leaves a node alone."""

    # never a candidate
    NOT_OWNED = "not-owned"
    NODEPOOL_MISSING = "nodepool-missing"
    NODEPOOL_UNMANAGED = "nodepool-unmanaged"
    DELETING = "deleting"
    BEING_DISRUPTED = "being-disrupted"
    LAUNCHED_FOR = "launched-for"  # a replacement of a decision still being carried out
    NO_NODECLAIM = "no-nodeclaim"  # only with require_nodeclaim (ebb next to Karpenter)
    KARPENTER_CONFLICT = "karpenter-conflict"  # its NodePool conflicts with Karpenter (ebb.core.conflicts)
    NOT_INITIALIZED = "not-initialized"
    # no method may disrupt it
    NODE_DO_NOT_DISRUPT = "node-do-not-disrupt"
    POD_DO_NOT_DISRUPT = "pod-do-not-disrupt"
    POD_PROTECTED_UNTIL = "pod-protected-until"
    POD_TWO_PDBS = "pod-two-pdbs"
    PDB_BLOCKS = "pdb-blocks"
    NODEPOOL_DO_NOT_DISRUPT = "nodepool-do-not-disrupt"
    # it may not be consolidated (emptiness, multi- and single-node consolidation)
    NODE_DO_NOT_CONSOLIDATE = "node-do-not-consolidate"
    STATIC_NODEPOOL = "static-nodepool"  # its NodePool has spec.replicas
    NODECLAIM_NOT_INITIALIZED = "nodeclaim-not-initialized"  # Karpenter's Consolidatable waits for Initialized=True
    PRICE_UNKNOWN = "price-unknown"  # no instance-type, capacity-type or zone label: no price to compare
    TYPE_NOT_IN_CATALOG = "type-not-in-catalog"  # its instance type is none the catalog lists: no price to compare
    # no NodePool may open a node (each is not Ready, being deleted or static): Karpenter simulates no move at all
    NO_NODEPOOL_LAUNCHES = "no-nodepool-launches"
    CONSOLIDATION_POLICY = "consolidation-policy"
    CONSOLIDATE_AFTER_NEVER = "consolidate-after-never"
    PAUSED = "paused"  # inner: HOLD or STABILIZATION_WINDOW
    HOLD = "hold"
    STABILIZATION_WINDOW = "stabilization-window"
    NOT_STABLE = "not-stable"  # consolidateAfter has not passed since its pods changed
    DEMAND_WINDOW = "demand-window"  # its NodePool's nodes would hold less than their demandWindow's peak request
    # the budget for the reason has no room
    BUDGET_INVALID = "budget-invalid"
    BUDGET_ZERO = "budget-zero"
    BUDGET_USED_UP = "budget-used-up"
    BUDGET_USED_BY_CONSOLIDATIONS = "budget-used-by-consolidations"
    # explained only: the budget goes to commands of methods that wait because an earlier one acted this pass
    BUDGET_FOR_WAITING_COMMANDS = "budget-for-waiting-commands"
    # a method wanted it, but (inner)
    EMPTY_BUT = "empty-but"
    DUE_BUT = "due-but"  # expired or drifted (the method's finding in `due`)
    POD_NOWHERE_TO_GO = "pod-nowhere-to-go"
    NOMINATED = "nominated"  # an empty node pending pods or pods of disrupted nodes are expected on
    STATIC_SCALING_DOWN = "static-scaling-down"  # a static NodePool has more nodes than its replicas
    STATIC_AT_LIMIT = "static-at-limit"  # a one-for-one replacement would pass the static NodePool's limits.nodes
    STATIC_NOTHING_OFFERED = "static-nothing-offered"  # no offering the static NodePool allows
    # single-node consolidation found no command
    PODS_FIT_NOWHERE = "pods-fit-nowhere"
    NO_REPLACEMENT = "no-replacement"  # inner: one of the four below
    NO_CHEAPER_REPLACEMENT = "no-cheaper-replacement"
    # the cheaper options are all the type of a node it removes (Karpenter's filterOutSameInstanceType)
    ONLY_SAME_TYPE_CHEAPER = "only-same-type-cheaper"
    PRICE_IMPROVEMENT_TOO_SMALL = "price-improvement-too-small"  # cheaper, but less than the pool's minimum
    SPOT_TO_SPOT_DISABLED = "spot-to-spot-disabled"
    SPOT_TO_SPOT_TOO_FEW_TYPES = "spot-to-spot-too-few-types"
    NO_SPOT_OFFERING = "no-spot-offering"  # spot-to-spot on, and no spot offering holds the pods
    # a replacement's options (consolidation: the cheaper ones) break a NodePool requirement's minValues
    MIN_VALUES_NOT_MET = "min-values-not-met"
    # inner: single-node consolidation's verdict; `merge`: why multi-node's merge search refused a set holding it
    NO_MERGE = "no-merge"
    ALONE_SAVES_MORE = "alone-saves-more"  # a merge saves no more than its nodes would one at a time
    # its NodePool's consolidationPolicy is Balanced and the move's score is below the threshold (ebb.core.balanced)
    BALANCED_SCORE = "balanced-score"
    # Balanced scores a move 0 in a NodePool whose nodes cost nothing (or cause no disruption): nothing to measure by
    BALANCED_UNMEASURED = "balanced-unmeasured"
    # it saves less than its NodePool's minimumSavingPerEvictedPod times the pods it evicts (ebb.core.worth)
    EVICTIONS_NOT_WORTH = "evictions-not-worth"
    # a pod a command of this pass moves requires pod affinity to one of its pods: moved at once, the two could land
    # apart (the commands run at the same time); considered again next pass
    AFFINITY_TARGET_OF_A_MOVE = "affinity-target-of-a-move"
    # the engine's own
    ANOTHER_METHOD_ACTED = "another-method-acted"
    BUDGET_WAIT = "budget-wait"  # inner: the budget; on its own it could be consolidated
    BUDGET_WAIT_UNCONSOLIDATABLE = "budget-wait-unconsolidatable"  # inner: the budget; `alone`: why not alone
    NOTHING_TO_DO = "nothing-to-do"


class Stale(StrEnum):
    """Why a command decided earlier is no longer right against a fresher snapshot."""

    NODE_GONE = "node-gone"
    NO_LONGER_CANDIDATE = "no-longer-candidate"  # inner: the BlockCause
    NO_LONGER_EXPIRED = "no-longer-expired"
    NO_LONGER_DRIFTED = "no-longer-drifted"
    CONSOLIDATION_PAUSED = "consolidation-paused"  # inner: HOLD or STABILIZATION_WINDOW
    CONSOLIDATE_AFTER_NOW_NEVER = "consolidate-after-now-never"
    NODE_CHANGED = "node-changed"  # inner: NOT_STABLE
    NO_LONGER_EMPTY = "no-longer-empty"
    BUDGET_SHRANK = "budget-shrank"
    BELOW_DEMAND_PEAK = "below-demand-peak"  # inner: DEMAND_WINDOW
    EVICTIONS_NOW_NOT_WORTH = "evictions-now-not-worth"  # inner: EVICTIONS_NOT_WORTH (pods arrived since)
    POD_NO_LONGER_FITS = "pod-no-longer-fits"
    REPLACEMENT_DEARER = "replacement-dearer"
    REPLACEMENT_NOT_NEEDED = "replacement-not-needed"
    REPLACEMENT_CHANGED = "replacement-changed"  # an approved instance type no longer holds the pods
    VIEW_BEHIND = "view-behind"
    VIEW_UNCHECKED = "view-unchecked"


SENTENCES: Mapping[Cause, str] = {
    Cause.NOT_OWNED: "it is not owned by a NodePool (no karpenter.sh/nodepool label){claim:aside}",
    Cause.NODEPOOL_MISSING: "its NodePool {pool} is not in the snapshot",
    Cause.NODEPOOL_UNMANAGED: "its NodePool {pool} has no spec.template.spec.nodeClassRef, which Karpenter's CRD "
                              "requires: Karpenter manages no NodePool without one",
    Cause.DELETING: "it is already being deleted",
    Cause.BEING_DISRUPTED: "it is already being disrupted (tainted {taint})",
    Cause.LAUNCHED_FOR: "it was launched as a replacement for decision {decision}, which is still being carried out",
    Cause.NO_NODECLAIM: ("it has no NodeClaim: with the karpenter provider ebb retires nodes by deleting their "
                         "NodeClaim"),
    Cause.KARPENTER_CONFLICT: ("ebb disrupts no node of NodePool {pool} until this conflict is fixed: "
                               "{conflict}"),
    Cause.NOT_INITIALIZED: "it is not initialized yet (karpenter.sh/initialized is not true)",
    Cause.NODE_DO_NOT_DISRUPT: "the node is annotated karpenter.sh/do-not-disrupt=true",
    Cause.POD_DO_NOT_DISRUPT: "pod {pod} has {annotation}={value}",
    Cause.POD_PROTECTED_UNTIL: "pod {pod} has {annotation}={value} (protected until {until:time})",
    Cause.POD_TWO_PDBS: "pod {pod} is covered by two PDBs ({pdbs:and}); the Eviction API refuses to evict it",
    Cause.PDB_BLOCKS: ("pdb {pdb} prevents pod evictions (0 disruptions allowed: {healthy} of {expected} pods "
                       "healthy)"),
    Cause.NODEPOOL_DO_NOT_DISRUPT: "NodePool {pool}'s template annotates its nodes karpenter.sh/do-not-disrupt=true",
    Cause.NODE_DO_NOT_CONSOLIDATE: "the node is annotated karpenter.sh/do-not-consolidate=true",
    Cause.STATIC_NODEPOOL: ("its NodePool {pool} is static (spec.replicas {replicas}): its nodes are not consolidated "
                            "(Karpenter removes those over its replicas)"),
    Cause.NO_NODEPOOL_LAUNCHES: ("no NodePool can launch a node now ({pools}), so no move of pods is simulated, as "
                                 "Karpenter's scheduler finds no NodePool"),
    Cause.NODECLAIM_NOT_INITIALIZED: ("its NodeClaim {claim} is not Initialized yet: it is not consolidated until it "
                                      "is, as Karpenter's Consolidatable condition waits for it"),
    Cause.PRICE_UNKNOWN: "it has no {label} label, so its price is unknown and consolidation cannot compare it",
    Cause.TYPE_NOT_IN_CATALOG: ("its instance type {type} is not in the catalog, so its price is unknown and "
                                "consolidation does not take it, as Karpenter's does not (only emptiness may)"),
    Cause.CONSOLIDATION_POLICY: ("{source}'s consolidationPolicy is {policy}: only empty nodes are "
                                 "consolidated"),
    Cause.CONSOLIDATE_AFTER_NEVER: "{source}'s consolidateAfter is Never",
    Cause.PAUSED: "consolidation is paused by {inner}",
    Cause.HOLD: "{hold:hold}",
    Cause.STABILIZATION_WINDOW: ("{source}'s stabilizationWindow ({window:duration}), in effect since node "
                                 "{newest} launched {age:ago}; Empty and Underutilized disruptions resume "
                                 "at {resume:time}"),
    Cause.NOT_STABLE: ("{whose}consolidateAfter ({after:duration}) has not passed since {since:since} at "
                       "{last:time}; it becomes consolidatable at {ready:time}"),
    Cause.DEMAND_WINDOW: ("{source}'s demandWindow ({window:duration}) keeps capacity for what its pods requested "
                          "at their peak within it ({peak}); {action} would leave its nodes {after}"),
    Cause.BUDGET_INVALID: "{detail}",
    Cause.BUDGET_ZERO: "the {reason} budget allows 0 disruptions now: {detail}",
    Cause.BUDGET_USED_UP: "the {reason} budget of {source} is used up by other disruptions this pass ({detail})",
    Cause.BUDGET_USED_BY_CONSOLIDATIONS: ("the {reason} budget of {source} is used up by the other "
                                          "consolidations of this pass; it is considered again next pass"),
    Cause.BUDGET_FOR_WAITING_COMMANDS: ("the {reason} budget of {source} would be used up by the commands of "
                                        "{by:and}, which wait because {acted} acted this pass and only one "
                                        "method acts per pass ({detail})"),
    Cause.EMPTY_BUT: "empty, but {inner}",
    Cause.DUE_BUT: "{due}, but {inner}",
    Cause.POD_NOWHERE_TO_GO: "pod {pod} would have nowhere to go: {why}",
    Cause.NOMINATED: ("it is nominated for pod {pod}, pending or leaving a node being disrupted, which has "
                      "nowhere else to go ({why})"),
    Cause.STATIC_SCALING_DOWN: ("its NodePool {pool} is static and runs more nodes ({count}) than its spec.replicas "
                                "{replicas}: its nodes are replaced one for one once Karpenter has scaled it down"),
    Cause.STATIC_AT_LIMIT: ("its NodePool {pool} is static and a replacement launched before it goes would pass "
                            "its limits.nodes ({limit})"),
    Cause.STATIC_NOTHING_OFFERED: "its NodePool {pool} is static and no instance type it allows is offered",
    Cause.PODS_FIT_NOWHERE: ("its pods do not fit on the other nodes (pod {pod}: {why}), and not on one new node "
                             "either{new:aside}"),
    Cause.NO_REPLACEMENT: "its pods do not fit on the other nodes (pod {pod}: {why}), and {inner}",
    Cause.NO_CHEAPER_REPLACEMENT: ("can't replace with a cheaper node: its pods need a node costing "
                                   "${needed:.4f}/h or more{where:aside}, and it costs ${price:.4f}/h"),
    Cause.ONLY_SAME_TYPE_CHEAPER: ("can't replace with a cheaper node of another type: its pods fit type {type} "
                                   "(${cheapest:.4f}/h against ${price:.4f}/h), the same type as {node}, which it "
                                   "would remove: keeping {node} and deleting the others does as well, so the option "
                                   "is left out, as Karpenter leaves it out"),
    Cause.PRICE_IMPROVEMENT_TOO_SMALL: ("{source}'s minimumPriceImprovementPercent ({percent}%) is not met: the "
                                        "{launched} ${best:.4f}/h against ${price:.4f}/h, "
                                        "{improvement:.1f_below_percent}% less"),
    Cause.SPOT_TO_SPOT_DISABLED: ("spot-to-spot consolidation is disabled: spot nodes whose replacement may be "
                                  "spot are only deleted, replaced by spot when enabled (--spot-to-spot or NodePool "
                                  "annotation ebb.sh/spot-to-spot-consolidation)"),
    Cause.NO_SPOT_OFFERING: ("spot nodes whose replacement may be spot are replaced by spot only, and no spot "
                             "offering holds their pods"),
    Cause.SPOT_TO_SPOT_TOO_FEW_TYPES: ("spot-to-spot replacement needs at least {minimum} cheaper instance types to "
                                       "choose from; only {found} qualify"),
    Cause.MIN_VALUES_NOT_MET: ("minValues requirement is not met for label(s) (label(s)={labels}): the {options} "
                               "offer only {found}"),
    Cause.NO_MERGE: ("{inner}; a merge of the first {size} candidates, it included, into {into} was considered "
                     "too and refused: {merge}"),
    Cause.AFFINITY_TARGET_OF_A_MOVE: ("pod {pod}, which a command of this pass moves to {to}, requires pod "
                                      "affinity to its pod {target}; moving both at once could leave {pod} with "
                                      "nowhere to go, so it is considered again next pass"),
    Cause.ALONE_SAVES_MORE: ("consolidated one at a time, its nodes would save ${alone:.4f}/h, no less than its "
                             "${savings:.4f}/h{net:aside}"),
    Cause.BALANCED_UNMEASURED: ("{source}'s consolidationPolicy is Balanced and {action} scores 0: NodePool {pool}'s "
                                "nodes {nothing}, so there is nothing to measure it against (score 0.00, below "
                                "{threshold:.2f}, k={k})"),
    Cause.BALANCED_SCORE: ("{source}'s consolidationPolicy is Balanced and {action} is not worth its disruption: "
                           "it would save {savings_percent:.1f}% of NodePool {pool}'s cost for "
                           "{disruption_percent:.1f}% of its disruption cost (score "
                           "{score:.2f_below_threshold}, below "
                           "{threshold:.2f}, k={k})"),
    Cause.EVICTIONS_NOT_WORTH: ("{action} would evict {evictions}{weighted} to save ${savings:.4f_below_asked}/h "
                                "(${per_pod:.4f_below_price}/h {per}); {source:and}'s "
                                "minimumSavingPerEvictedPod asks "
                                "at least ${price:.4f}/h per evicted pod, ${asked:.4f}/h for these"),
    Cause.ANOTHER_METHOD_ACTED: ("it could be disrupted by {method} ({action}), but {acted} acted this pass and only "
                                 "one method acts per pass; it is considered again next pass"),
    Cause.BUDGET_WAIT: "{inner}; on its own it could be consolidated ({action}, saving ${savings:.4f}/h)",
    Cause.BUDGET_WAIT_UNCONSOLIDATABLE: "{alone} (and {inner})",
    Cause.NOTHING_TO_DO: ("nothing to do: it is not expired, drifted or empty, and no consolidation makes the "
                          "cluster cheaper"),
}

STALE_SENTENCES: Mapping[Stale, str] = {
    Stale.NODE_GONE: "node {node} is gone",
    Stale.NO_LONGER_CANDIDATE: "node {node} is no longer a candidate: {inner}",
    Stale.NO_LONGER_EXPIRED: "node {node} is no longer expired",
    Stale.NO_LONGER_DRIFTED: "node {node} is no longer drifted",
    Stale.CONSOLIDATION_PAUSED: "consolidation of node {node} is paused by {inner}",
    Stale.CONSOLIDATE_AFTER_NOW_NEVER: "{source}'s consolidateAfter is now Never",
    Stale.NODE_CHANGED: "node {node} changed: {inner}",
    Stale.NO_LONGER_EMPTY: "node {node} is no longer empty: {arrived} pods arrived",
    Stale.BUDGET_SHRANK: ("the {reason} budget of {source} now allows {allowed} disruptions, the command "
                          "needs {needed}"),
    Stale.BELOW_DEMAND_PEAK: "{inner}",
    Stale.EVICTIONS_NOW_NOT_WORTH: "its nodes have more pods now: {inner}",
    Stale.POD_NO_LONGER_FITS: "pod {pod} would no longer fit: {why}",
    Stale.REPLACEMENT_DEARER: ("the replacement now costs ${price:.4f}/h, more than the ${approved:.4f}/h the "
                               "command was approved for"),
    Stale.REPLACEMENT_NOT_NEEDED: ("its pods now need {needed:new_nodes}, fewer than the {approved:new_nodes} the "
                                   "command would launch: a cheaper command is likely now"),
    Stale.REPLACEMENT_CHANGED: ("its pods now need another replacement: the approved one may launch as {types:and}, "
                                "which a new simulation no longer places them on"),
    Stale.VIEW_BEHIND: ("the planner's view is behind the apiserver: {count} pods run on node {node} that it has "
                        "not seen there yet ({pods:and})"),
    Stale.VIEW_UNCHECKED: "the apiserver could not be asked for the pods on the command's nodes: {error}",
}

#: the budget kinds: a node blocked by one of these alone waits only for room in its budget
BUDGET_CAUSES = frozenset({Cause.BUDGET_INVALID, Cause.BUDGET_ZERO, Cause.BUDGET_USED_UP,
                           Cause.BUDGET_USED_BY_CONSOLIDATIONS, Cause.BUDGET_FOR_WAITING_COMMANDS})


@dataclass(frozen=True, slots=True)
class BlockCause:
    """Why a pass leaves a node alone: the kind, the values of its sentence, and the cause it qualifies."""

    kind: Cause
    values: Mapping[str, object] = field(default_factory=dict, hash=False)
    inner: BlockCause | None = None

    @property
    def text(self) -> str:
        return render(self)

    @property
    def waits_for_budget(self) -> bool:
        """Whether the budget alone stops it (room in a later pass would let it go)."""
        return self.kind in BUDGET_CAUSES

    def __str__(self) -> str:
        return render(self)


@dataclass(frozen=True, slots=True)
class StaleCause:
    """Why a decided command is stale: the kind, the values of its sentence, and the BlockCause behind it."""

    kind: Stale
    values: Mapping[str, object] = field(default_factory=dict, hash=False)
    inner: BlockCause | None = None

    @property
    def text(self) -> str:
        return render(self)

    def __str__(self) -> str:
        return render(self)


#: a node that no method wants: not expired, drifted or empty, and no consolidation saves money
NOTHING_TO_DO = BlockCause(Cause.NOTHING_TO_DO)


def describe_hold(hold: Hold) -> str:
    """A Hold as a pause reason names it: ``hold freeze (nodePool default) until 2026-...: incident``."""
    target = f" {hold.target}" if hold.target else ""
    until = f" until {fmt_time(hold.expires)}" if hold.expires else ""
    why = f": {hold.reason}" if hold.reason else ""
    return f"hold {hold.name} ({hold.scope}{target}){until}{why}"


def _time(value: object) -> str:
    assert isinstance(value, datetime)
    return fmt_time(value)


def _duration(value: object) -> str:
    assert isinstance(value, int | float)
    return format_duration(value)


def _ago(value: object) -> str:
    """How long ago something happened ("5m ago"), or how long after now when its time is ahead of the clock
    ("5m after now": a plan at a time before the snapshot was taken, or a skewed clock)."""
    assert isinstance(value, int | float)
    return f"{format_duration(value)} ago" if round(value) >= 0 else f"{format_duration(-value)} after now"


def _joined(value: object) -> str:
    assert isinstance(value, tuple)
    return " and ".join(str(v) for v in value)


def _new_nodes(value: object) -> str:
    assert isinstance(value, int)
    return "no new node" if value == 0 else "1 new node" if value == 1 else f"{value} new nodes"


def _hold(value: object) -> str:
    assert isinstance(value, Hold)
    return describe_hold(value)


def _since(value: object) -> str:
    """What a consolidateAfter is counted from (`ClusterView.last_pod_event`): the node's pods' last change unless
    the cause says another moment (its launch, its NodeClaim's initialization)."""
    return "the node's pods last changed" if value is None or value == "" else str(value)


def _aside(value: object) -> str:
    """An optional detail in parentheses after the words before it: nothing when the cause has none."""
    return "" if value is None or value == "" else f" ({value})"


_NAMED_FORMATS: Mapping[str, Callable[[object], str]] = {
    "time": _time, "duration": _duration, "ago": _ago, "and": _joined, "new_nodes": _new_nodes, "hold": _hold,
    "aside": _aside, "since": _since}

#: the most decimals `short_of` adds to tell a figure from its threshold
_MORE_DECIMALS = 8


def short_of(value: float, bound: float, decimals: int) -> str:
    """``value``, which falls short of ``bound``, with ``decimals`` decimals, or more while rounding would make it
    read as reaching ``bound`` (29.99 against 30 with one: ``29.99``; 0.4995 against 0.5 with two: ``0.4995``);
    past `_MORE_DECIMALS` more, rounded down. A value not below ``bound`` is written with ``decimals``."""
    if not value < bound:
        return f"{value:.{decimals}f}"
    for places in range(decimals, decimals + _MORE_DECIMALS + 1):
        text = f"{value:.{places}f}"
        if float(text) < bound:
            return text
    scale = 10 ** (decimals + _MORE_DECIMALS)
    return f"{math.floor(value * scale) / scale:.{decimals + _MORE_DECIMALS}f}"


def _below(spec: str) -> Callable[[object, Mapping[str, object]], str] | None:
    """The format of a ``.Nf_below_FIELD`` spec (`short_of` against the value of FIELD), or None for another spec."""
    head, sep, bound = spec.partition("_below_")
    if not sep or not (head.startswith(".") and head.endswith("f") and head[1:-1].isdigit()):
        return None
    decimals = int(head[1:-1])

    def written(value: object, values: Mapping[str, object]) -> str:
        limit = values.get(bound)
        assert isinstance(value, int | float) and isinstance(limit, int | float)
        return short_of(float(value), float(limit), decimals)
    return written


@dataclass(frozen=True, slots=True)
class _Template:
    """A template made ready for `str.format_map` (C speed): each ``{x:named}`` field is rewritten to a plain
    field ``{x__named}`` whose value `render` computes with the named format."""

    text: str
    #: (field, the value it formats, how: from that value and all the cause's values)
    derived: tuple[tuple[str, str, Callable[[object, Mapping[str, object]], str]], ...]


def _named(spec: str) -> Callable[[object, Mapping[str, object]], str] | None:
    """How a named format of ebb's own writes a value (with the cause's other values at hand), or None."""
    named = _NAMED_FORMATS.get(spec)
    if named is not None:
        return lambda value, _values: named(value)
    return _below(spec)


def _dollars(value: object, _values: Mapping[str, object]) -> str:
    """How a ``${x:.4f}`` amount is written (`ebb.core.quantity.dollars`: an amount too small for four decimals keeps
    two significant digits)."""
    return dollars(float(value)) if isinstance(value, int | float) else str(value)


def _compile(template: str) -> _Template:
    parts: list[str] = []
    derived: list[tuple[str, str, Callable[[object, Mapping[str, object]], str]]] = []
    for literal, name, spec, conversion in string.Formatter().parse(template):
        parts.append(literal.replace("{", "{{").replace("}", "}}"))
        if name is None:
            continue
        named = _dollars if spec == ".4f" and literal.endswith("$") else _named(spec or "")
        if named is not None:
            field_name = f"{name}__{len(derived)}"
            derived.append((field_name, name, named))
            parts.append(f"{{{field_name}}}")
        else:
            parts.append("{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}")
    return _Template("".join(parts), tuple(derived))


_TEMPLATES: Mapping[Cause | Stale, _Template] = {
    kind: _compile(template) for table in (SENTENCES, STALE_SENTENCES) for kind, template in table.items()}


def render(cause: BlockCause | StaleCause) -> str:
    """The sentence of a cause (its inner cause's sentence included)."""
    template = _TEMPLATES[cause.kind]
    values = {**cause.values, "inner": cause.inner}
    for field_name, name, named in template.derived:
        values[field_name] = named(values.get(name), values)  # it may stand for a value a cause leaves out
    return template.text.format_map(values)
