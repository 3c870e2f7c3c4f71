"""Conflicts: where ebb and Karpenter would both act on the same nodes, or ebb's set-up cannot be what the user meant.

Two controllers that consolidate the same nodes undo each other's work, and two that drain the same interrupted
node race each other. `conflicts(snapshot, settings)` lists every such conflict the snapshot shows, each a
`Conflict`: its kind, the object to fix, the NodePool it concerns (None: none in particular) and a sentence that
says what is wrong and how to fix it. The checks (docs/karpenter.md#the-conflict-check):

- ``KarpenterBudgets``: a NodePool whose own ``spec.disruption.budgets`` still let Karpenter disrupt (no budget
  of ``nodes: "0"`` that is always active and covers every reason Karpenter has: Empty, Drifted, Underutilized);
- ``KarpenterExpiry``: a NodePool whose own ``expireAfter`` is not ``Never`` (Karpenter's default, 720h, when it
  sets none): Karpenter's expiry is forceful and ignores budgets;
- ``NodeClaimExpiry``: NodeClaims that keep an ``expireAfter`` (a NodeClaim keeps the one it was launched with,
  so those launched before the NodePool was switched over still expire; one whose input states none is read with
  its NodePool's, `claim_expire_after`);
- ``NodeClaimsWithoutKarpenterProvider``: NodeClaims exist and ebb's provider is not ``karpenter`` (the other
  providers retire a node themselves and take Karpenter's finalizer off: its instance would not be terminated);
- ``PolicyWithoutNodePool``: a DisruptionPolicy whose NodePool does not exist (it applies to nothing);
- ``InterruptionQueue``: Karpenter's Deployment has an interruption queue while ebb's interruption-ingester runs.

**When is there a Karpenter to conflict with** (`karpenter_seen`): when the provider is ``karpenter``, when the
snapshot holds a NodeClaim, or when it holds Karpenter's Deployment. Without any of these (the embedded mode,
``ebb plan`` on a dump without NodeClaims, a cluster where ebb's ``kwok`` or ``none`` provider launches the
nodes) a NodePool's own budgets and expireAfter are ebb's settings, read by nobody else, and the three NodePool
checks are not made. The others do not depend on it.

**What a conflict stops** (`refused`): in the default mode (``enforce``), a NodePool named by a conflict is not
disrupted by ebb at all until the conflict is gone; each of its nodes says so (`ebb.core.causes`,
``Cause.KARPENTER_CONFLICT``). A conflict that names no NodePool (a DisruptionPolicy without one, the
interruption queue) only warns: there is nothing of ebb's to hold back (an interruption is the cloud's, handled
at once whoever else handles it). ``shadow`` (ebb plans beside a Karpenter that still disrupts, and executes
nothing) refuses nothing; it is the mode shadow mode will set.

Every DisruptionPolicy gets the status condition ``ConflictFree`` (`policy_condition`): False with the conflicts
of its NodePool (or of itself), True when there are none. Pure: a snapshot and settings in, values out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Final, Literal

from ebb.core.model import Budget, NodeClaim, NodePool, Snapshot
from ebb.core.quantity import fmt_time, format_duration


class ConflictKind(StrEnum):
    """What conflicts (the label value of ``ebb_conflicts{kind}``)."""

    KARPENTER_BUDGETS = "KarpenterBudgets"
    KARPENTER_EXPIRY = "KarpenterExpiry"
    NODECLAIM_EXPIRY = "NodeClaimExpiry"
    NODECLAIMS_WITHOUT_KARPENTER_PROVIDER = "NodeClaimsWithoutKarpenterProvider"
    POLICY_WITHOUT_NODEPOOL = "PolicyWithoutNodePool"
    INTERRUPTION_QUEUE = "InterruptionQueue"


#: what conflicts do: ``enforce`` refuses the NodePools they name (every service's and ``ebb plan``'s mode),
#: ``shadow`` only reports them
Mode = Literal["enforce", "shadow"]
DEFAULT_MODE: Final[Mode] = "enforce"
#: the provider whose replacements and retirements go through Karpenter's NodeClaims
KARPENTER_PROVIDER: Final = "karpenter"
#: the disruption reasons Karpenter's budgets know (v1); a budget that stops Karpenter must cover all of them
KARPENTER_REASONS: Final = frozenset({"Empty", "Drifted", "Underutilized"})
#: how many objects a sentence names before it counts the rest
NAMED: Final = 5


@dataclass(frozen=True, slots=True)
class Conflict:
    kind: ConflictKind
    #: the object to fix, ``Kind name`` (``NodePool general``, ``Deployment kube-system/karpenter``)
    object: str
    #: the NodePool the conflict concerns, which ``enforce`` refuses to disrupt (None: it concerns none)
    nodepool: str | None
    #: what is wrong and how to fix it
    message: str


@dataclass(frozen=True, slots=True)
class ConflictSettings:
    """What the checks need besides the snapshot: the executor's provider (``karpenter``, ``kwok``, ``none``,
    ``simulated``) and whether ebb's interruption-ingester runs beside the caller."""

    provider: str = "none"
    interruption_ingester: bool = False


def _named(names: Iterable[str]) -> str:
    listed = sorted(names)
    more = len(listed) - NAMED
    return ", ".join(listed[:NAMED]) + (f", and {more} more" if more > 0 else "")


def karpenter_seen(snapshot: Snapshot, settings: ConflictSettings) -> str | None:
    """Why there is a Karpenter that could disrupt the snapshot's NodePools (a phrase), or None when there is
    none to see: the provider is karpenter, the snapshot holds NodeClaims, or it holds Karpenter's Deployment."""
    if settings.provider == KARPENTER_PROVIDER:
        return "the provider is karpenter"
    if snapshot.nodeclaims:
        return f"the cluster has {len(snapshot.nodeclaims)} NodeClaim(s)"
    if snapshot.karpenter:
        return f"Karpenter's Deployment {snapshot.karpenter[0].name} is there"
    return None


def _allows_none(nodes: str) -> bool:
    """A budget's ``nodes`` that allows no disruption: 0 or 0%, however written ("00", "0%"), as Karpenter's
    ``GetIntStrFromValue`` reads it."""
    value = nodes.strip()
    value = value[:-1] if value.endswith("%") else value
    return value.isdigit() and int(value) == 0


def karpenter_stopped_by(budgets: tuple[Budget, ...]) -> bool:
    """Whether ``budgets`` (a NodePool's own) stop Karpenter's voluntary disruption for good: for every reason Karpenter
    has, a budget that applies to it (no ``reasons``, or it among them) allows 0 nodes, always (no schedule), as
    Karpenter takes the smallest active budget per reason (``GetAllowedDisruptionsByReason``)."""
    stopping = [b for b in budgets if _allows_none(b.nodes) and b.schedule is None]
    return all(any(b.reasons is None or reason in b.reasons for b in stopping) for reason in KARPENTER_REASONS)


def _budgets_text(budgets: tuple[Budget, ...]) -> str:
    def one(b: Budget) -> str:
        parts = [f'nodes: "{b.nodes}"']
        if b.schedule is not None:
            parts.append(f'schedule: "{b.schedule}"')
        if b.duration is not None:
            parts.append(f"duration: {b.duration}")
        if b.reasons is not None:
            parts.append(f"reasons: [{', '.join(b.reasons)}]")
        return "{" + ", ".join(parts) + "}"

    return "[" + ", ".join(one(b) for b in budgets) + "]"


def _pool_conflicts(pool: NodePool, claims: list[NodeClaim]) -> list[Conflict]:
    out: list[Conflict] = []
    name = pool.name
    budgets = pool.karpenter_budgets
    if not karpenter_stopped_by(budgets):
        out.append(Conflict(ConflictKind.KARPENTER_BUDGETS, f"NodePool {name}", name, (
            f"NodePool {name} still lets Karpenter disrupt its nodes: its spec.disruption.budgets "
            f"{_budgets_text(budgets)} do not allow 0 nodes, always, for every reason; "
            f"set spec.disruption.budgets to [{{nodes: \"0\"}}] and give ebb its budgets in DisruptionPolicy {name}")))
    expire = pool.karpenter_expire_after
    if expire is not None:
        stated = ("Karpenter's default, as the NodePool sets none" if pool.karpenter_expire_after_default
                  else "as the NodePool sets it")
        out.append(Conflict(ConflictKind.KARPENTER_EXPIRY, f"NodePool {name}", name, (
            f"NodePool {name}'s spec.template.spec.expireAfter is {format_duration(expire)} ({stated}): Karpenter "
            f"expires its nodes itself, forcefully and without a budget; set it to Never and give ebb the expiry in "
            f"DisruptionPolicy {name}'s expireAfter")))
    expiring = [(c, after) for c in claims if (after := claim_expire_after(c, pool)) is not None and not c.deleting]
    if expiring:
        due = [c.creation_time + timedelta(seconds=after) for c, after in expiring if c.creation_time is not None]
        first = f"; the first expires at {fmt_time(min(due))}" if due else ""
        unstated = [c.name for c, _ in expiring if not c.expire_after_stated]
        read = (f"; {_named(unstated)} state(s) none, read as the NodePool's, which Karpenter writes into every "
                "NodeClaim it launches" if unstated else "")
        named = _named(c.name for c, _ in expiring)
        out.append(Conflict(ConflictKind.NODECLAIM_EXPIRY, f"NodeClaim {named}", name, (
            f"{len(expiring)} NodeClaim(s) of NodePool {name} keep the expireAfter they were launched with, which "
            f"Karpenter acts on whatever the NodePool says now ({named}{first}{read}); replace "
            f"them (kubectl delete nodeclaim NAME, one at a time: Karpenter drains each and provisions for its pods) "
            f"or wait until Karpenter has expired them")))
    return out


def claim_expire_after(claim: NodeClaim, pool: NodePool) -> float | None:
    """The ``expireAfter`` Karpenter expires ``claim`` by, in seconds (None: Never): its ``spec.expireAfter``, or,
    for a NodeClaim whose input lacks the field (a hand-written one: Karpenter writes its NodePool's
    ``spec.template.spec.expireAfter`` into every NodeClaim it launches, and its CRD defaults the field to 720h),
    its NodePool's as Karpenter reads it (`NodePool.karpenter_expire_after`: 720h when the NodePool sets none)."""
    return claim.expire_after if claim.expire_after_stated else pool.karpenter_expire_after


def conflicts(snapshot: Snapshot, settings: ConflictSettings) -> tuple[Conflict, ...]:
    """Every conflict ``snapshot`` shows under ``settings``: by NodePool (in name order; each pool's own checks in
    the module docstring's order), then the DisruptionPolicies without a NodePool, then the interruption queue."""
    out: list[Conflict] = []
    pools = {p.name: p for p in snapshot.nodepools}
    claims_of: dict[str | None, list[NodeClaim]] = {}
    # a NodeClaim without its karpenter.sh/nodepool label is of its Node's NodePool (by status.nodeName or providerID)
    pool_of_node = {n.name: n.nodepool for n in snapshot.nodes}
    pool_of_provider = {n.provider_id: n.nodepool for n in snapshot.nodes if n.provider_id}
    for claim in snapshot.nodeclaims:
        pool = (claim.nodepool or pool_of_node.get(claim.node_name or "")
                or pool_of_provider.get(claim.provider_id or ""))
        claims_of.setdefault(pool, []).append(claim)
    if karpenter_seen(snapshot, settings) is not None:
        for name in sorted(pools):
            out.extend(_pool_conflicts(pools[name], claims_of.get(name, [])))
    if settings.provider != KARPENTER_PROVIDER:
        for pool_name in sorted(claims_of, key=lambda p: (p is None, p or "")):
            claims = claims_of[pool_name]
            whose = f"NodePool {pool_name}" if pool_name is not None else "no NodePool"
            out.append(Conflict(
                ConflictKind.NODECLAIMS_WITHOUT_KARPENTER_PROVIDER, f"NodeClaim {_named(c.name for c in claims)}",
                pool_name if pool_name in pools else None, (
                    f"{len(claims)} NodeClaim(s) of {whose} exist ({_named(c.name for c in claims)}) but ebb's "
                    f"provider is {settings.provider}, not "
                    f"karpenter: ebb would retire their nodes itself and take Karpenter's karpenter.sh/termination "
                    f"finalizer off, so Karpenter would not terminate their instances; set the provider to karpenter "
                    f"(provider of the ConfigMap ebb-engine-options, EBB_TERMINATION_EXECUTOR_PROVIDER, "
                    f"ebb plan --provider karpenter)")))
    for policy in sorted(snapshot.disruption_policies, key=lambda p: p.name):
        if policy.name not in pools:
            out.append(Conflict(ConflictKind.POLICY_WITHOUT_NODEPOOL, f"DisruptionPolicy {policy.name}", None, (
                f"DisruptionPolicy {policy.name} names no NodePool: there is no NodePool {policy.name}, so it applies "
                f"to nothing (a DisruptionPolicy is named after its NodePool); rename it or create the NodePool")))
    if settings.interruption_ingester:
        for controller in snapshot.karpenter:
            if controller.interruption_queue:
                out.append(Conflict(ConflictKind.INTERRUPTION_QUEUE, f"Deployment {controller.name}", None, (
                    f"Karpenter's interruption queue is set ({controller.interruption_queue}, on Deployment "
                    f"{controller.name}) while ebb's interruption-ingester reads interruptions: both would drain and "
                    f"delete the same interrupted nodes; unset Karpenter's (settings.interruptionQueue of its chart: "
                    f"INTERRUPTION_QUEUE or --interruption-queue) and leave interruptions to ebb")))
    return tuple(out)


def refused(found: Iterable[Conflict], mode: Mode = DEFAULT_MODE) -> Mapping[str, Conflict]:
    """The NodePools ebb does not disrupt because of ``found``, each with its first conflict: every NodePool a
    conflict names in ``enforce`` mode, none in ``shadow``."""
    if mode == "shadow":
        return {}
    out: dict[str, Conflict] = {}
    for conflict in found:
        if conflict.nodepool is not None:
            out.setdefault(conflict.nodepool, conflict)
    return out


#: the condition the planner keeps on every DisruptionPolicy's status (``kubectl get edp`` shows it)
CONDITION_CONFLICT_FREE: Final = "ConflictFree"
#: its reason when True
NO_CONFLICT: Final = "NoConflict"


@dataclass(frozen=True, slots=True)
class Condition:
    """A status condition as the planner writes it (without its time: the writer stamps a change)."""

    status: Literal["True", "False"]
    reason: str
    message: str


def policy_condition(policy: str, found: Iterable[Conflict]) -> Condition:
    """The ``ConflictFree`` condition of DisruptionPolicy ``policy``: False, with the first conflict's kind as the
    reason and every sentence, when a conflict concerns its NodePool or the policy itself; else True."""
    own = [c for c in found if c.nodepool == policy or c.object == f"DisruptionPolicy {policy}"]
    if not own:
        return Condition("True", NO_CONFLICT, "no conflict with Karpenter: ebb disrupts this NodePool")
    return Condition("False", str(own[0].kind), " ".join(f"{c.message}." for c in own))


def conflict_json(conflict: Conflict) -> dict[str, str | None]:
    """A conflict as ``warnings[]`` of ``ebb plan -o json`` and ``conflicts`` of the decisions-api's /readyz."""
    return {"kind": str(conflict.kind), "object": conflict.object, "nodePool": conflict.nodepool,
            "message": conflict.message}
