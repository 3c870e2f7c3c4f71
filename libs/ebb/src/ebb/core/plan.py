"""`ebb plan`: one pass, or passes applied until nothing changes, and the JSON contract of docs/plan.md.

`--until-stable` applies each pass's commands to the snapshot (nodes removed, pods moved where the
simulation put them, replacements launched as the cheapest option, with their DaemonSet pods) and runs
the next pass, until a pass has no commands. Simulated time advances between passes by the longest
finite consolidateAfter of the NodePools (at least the 15 s validation delay), so moved pods must
settle as they would in a live cluster; new nodes are launched at that time, marked as replacements
(``ebb.sh/decision-id``) as live ones are, so they do not restart a stabilization window, exactly as live.

A plan carries the conflicts of its input (``warnings``, `ebb.core.conflicts`) when it is made with
``conflict_settings``; whether they refuse a NodePool's nodes is the options' ``refuse_conflicts``
(the same settings, as ``ebb plan`` gives them).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from ebb.core.conflicts import Conflict, ConflictSettings, conflict_json, conflicts
from ebb.core.engine import PassResult, run_pass
from ebb.core.labels import daemonset_runs_on_node
from ebb.core.launch import offering_for, requirement_labels
from ebb.core.methods.base import Command, EngineOptions
from ebb.core.model import (
    ANNOTATION_DECISION_ID,
    ANNOTATION_NODEPOOL_HASH,
    ANNOTATION_NODEPOOL_HASH_VERSION,
    LABEL_CAPACITY_TYPE,
    LABEL_HOSTNAME,
    LABEL_INITIALIZED,
    LABEL_INSTANCE_TYPE,
    LABEL_OS,
    LABEL_REGION,
    LABEL_ZONE,
    NEW_NODE_DEFAULT_LABELS,
    Node,
    NodeClaim,
    Pod,
    Snapshot,
)
from ebb.core.quantity import fmt_time
from ebb.core.simulator.binding import bind
from ebb.core.simulator.constraints import csi_zone_labels, csi_zone_value, zone_regions

VALIDATION_DELAY_SECONDS = 15.0
MAX_STEPS = 1000


@dataclass(frozen=True, slots=True)
class Plan:
    first: PassResult
    steps: tuple[PassResult, ...] | None  # with --until-stable
    #: the input's conflicts with Karpenter (``warnings[]`` of the JSON)
    warnings: tuple[Conflict, ...] = ()
    #: with --until-stable, the cluster after the last step's commands ran (what the plan ends at)
    final: Snapshot | None = None


def step_interval(snapshot: Snapshot) -> float:
    finite = [p.consolidate_after for p in snapshot.nodepools if p.consolidate_after is not None]
    return max([VALIDATION_DELAY_SECONDS, *finite])


def apply_commands(snapshot: Snapshot, commands: tuple[Command, ...], now: datetime, step: int) -> Snapshot:
    """The snapshot after the commands ran: what `--until-stable` feeds the next pass."""
    removed = {n for c in commands for n in c.nodes}
    types = {t.name: t for t in snapshot.instance_types}
    pools = {p.name: p for p in snapshot.nodepools}
    new_nodes: list[Node] = []
    new_pods: list[Pod] = []
    new_claims: list[NodeClaim] = []
    host_to_node: dict[str, str] = {}
    region_of = dict(zone_regions(snapshot))
    csi_zones = csi_zone_labels(node.labels for node in snapshot.nodes)
    for c_index, command in enumerate(commands):
        for r_index, rep in enumerate(command.replacements):
            it = types[rep.instance_types[0]]
            pool = pools[rep.nodepool]
            offer = offering_for(it, pool, rep.capacity_type, rep.zones, chosen=dict(rep.labels), available_only=True)
            if offer is None:  # the simulation plans a replacement only on an offering its type has
                raise ValueError(f"{it.name} has no {rep.capacity_type} offering in {', '.join(rep.zones)}")
            name = f"{rep.nodepool}-{it.name.replace('.', '-')}-s{step}c{c_index}r{r_index}"
            host_to_node[rep.hostname] = name
            # labelled as a launcher labels it (`ebb.core.launch.node_object`): with a value of each of the
            # NodePool's own requirements, the one the pods chose where they did, else its drift would replace it
            labels = {**NEW_NODE_DEFAULT_LABELS, **it.labels, LABEL_OS: it.os_under(pool.requirements),
                      **requirement_labels(pool, it, dict(rep.labels)), **pool.labels, **dict(offer.labels),
                      **pool.template_labels, LABEL_INSTANCE_TYPE: it.name, LABEL_ZONE: offer.zone,
                      LABEL_CAPACITY_TYPE: offer.capacity_type, LABEL_HOSTNAME: name, LABEL_INITIALIZED: "true"}
            region = region_of.get(offer.zone) or region_of.get("")
            if region is not None:  # as the simulation labels a new node (`zone_regions`)
                labels.setdefault(LABEL_REGION, region)
            for key, per_zone in csi_zones:  # and the zonal CSI drivers' keys the cluster's nodes carry
                value = csi_zone_value(per_zone, offer.zone)
                if value is not None:
                    labels.setdefault(key, value)
            annotations = {ANNOTATION_NODEPOOL_HASH: pool.hash or "", ANNOTATION_NODEPOOL_HASH_VERSION:
                           pool.hash_version or ""} if pool.hash else {}
            # a replacement, as live ones are marked: it does not restart a stabilization window
            annotations[ANNOTATION_DECISION_ID] = f"plan-step-{step}-command-{c_index}"
            allocatable = it.allocatable()
            node = Node(name, labels, annotations, pool.taints, allocatable, dict(it.capacity),
                        creation_time=now, provider_id=f"ebb:///{offer.zone}/{name}")
            new_nodes.append(node)
            if snapshot.nodeclaims:  # launched through Karpenter: a NodeClaim too, or it could never be retired
                new_claims.append(NodeClaim(name, pool.name, name, node.provider_id, initialized=True,
                                            creation_time=now, decision_id=annotations[ANNOTATION_DECISION_ID],
                                            expire_after=pool.karpenter_expire_after, labels=labels,
                                            annotations=annotations))
            for ds in snapshot.daemonsets:
                if daemonset_runs_on_node(ds, labels, pool.taints):
                    new_pods.append(Pod(f"{ds.name}-{name}", ds.namespace, dict(ds.labels), {}, ds.spec,
                                        node_name=name, owner_kind="DaemonSet", owner_name=ds.name,
                                        start_time=now, creation_time=now))
    placements: dict[str, str] = {}
    for command in commands:
        placements.update(command.placements)
    pods: list[Pod] = []
    for pod in snapshot.pods:
        if pod.node_name in removed:
            target = placements.get(pod.key)
            if target is None or not pod.needs_rescheduling:
                continue  # DaemonSet and static pods go with their node
            pods.append(replace(pod, node_name=host_to_node.get(target, target), start_time=now))
        else:
            pods.append(pod)
    nodes = tuple(n for n in snapshot.nodes if n.name not in removed) + tuple(new_nodes)
    claims = _claims_left(snapshot, removed)
    return replace(snapshot, nodes=nodes, pods=tuple(pods) + tuple(new_pods), nodeclaims=claims + tuple(new_claims))


def _claims_left(snapshot: Snapshot, removed: set[str]) -> tuple[NodeClaim, ...]:
    """The snapshot's NodeClaims but those of the ``removed`` nodes (by node name or provider id)."""
    gone_ids = {n.provider_id for n in snapshot.nodes if n.name in removed and n.provider_id}
    return tuple(c for c in snapshot.nodeclaims
                 if c.node_name not in removed and not (c.provider_id and c.provider_id in gone_ids))


def under_way(snapshot: Snapshot) -> bool:
    """Whether a node of ``snapshot`` is being taken away already: being deleted (its NodeClaim too) or carrying a
    disruption taint (Karpenter's or ebb's)."""
    return any(n.deleting or n.being_disrupted for n in snapshot.nodes)


def finish_under_way(snapshot: Snapshot, now: datetime) -> Snapshot:
    """The snapshot once the disruptions under way in it are done (`under_way`), as Karpenter's termination finishes
    them: those nodes and their NodeClaims gone, their pods that need a home bound where kube-scheduler would bind
    them (`ebb.core.simulator.binding.bind`, on the nodes left; started at ``now``), else left Pending; their other
    pods (DaemonSet, mirror, finished) gone with them. ``--until-stable`` does this after each pass, so a budget a
    node being deleted holds is freed for the next pass, as it is live once the node is gone."""
    going = {n.name for n in snapshot.nodes if n.deleting or n.being_disrupted}
    if not going:
        return snapshot
    staying: list[Pod] = []
    homeless: list[Pod] = []
    for pod in snapshot.pods:
        if pod.node_name not in going:
            staying.append(pod)
        elif pod.needs_rescheduling:  # made again, Pending (a StatefulSet's of the same name, no longer deleted)
            homeless.append(replace(pod, node_name=None, phase="Pending", start_time=None, deleting=False,
                                    deletion_time=None))
    left = replace(snapshot, nodes=tuple(n for n in snapshot.nodes if n.name not in going),
                   nodeclaims=_claims_left(snapshot, going), pods=(*staying, *homeless))
    if not homeless:
        return left
    bound, _ = bind(left, homeless, random.Random(0))
    moved = [replace(pod, node_name=bound[pod.key], phase="Running", start_time=now) if pod.key in bound else pod
             for pod in homeless]
    return replace(left, pods=(*staying, *moved))


def make_plan(snapshot: Snapshot, now: datetime, *, until_stable: bool = False,
              options: EngineOptions | None = None, conflict_settings: ConflictSettings | None = None) -> Plan:
    """One pass over ``snapshot`` at ``now`` (or, ``until_stable``, passes until nothing changes), with the conflicts
    of ``snapshot`` under ``conflict_settings`` when given."""
    options = options or EngineOptions()
    warnings = conflicts(snapshot, conflict_settings) if conflict_settings is not None else ()
    first = run_pass(options.view_of(snapshot, now), options)
    if not until_stable:
        return Plan(first, None, warnings)
    steps: list[PassResult] = []
    interval = timedelta(seconds=step_interval(snapshot))
    result, current, moment = first, snapshot, now
    quiet = replace(options, explain=False)
    while (result.commands or under_way(current)) and len(steps) < MAX_STEPS:
        steps.append(result)
        # the commands run at the moment they were decided, and the next pass looks an interval later: the pods
        # they moved have settled (no consolidateAfter is longer), as they would have before a live planner's pass;
        # the disruptions already under way in the input are done by then too
        current = finish_under_way(apply_commands(current, result.commands, moment, len(steps)), moment)
        moment = moment + interval
        result = run_pass(quiet.view_of(current, moment), quiet)
    steps.append(result)  # the last pass: nothing left to do (or MAX_STEPS reached)
    return Plan(first, tuple(steps), warnings, current)


@dataclass(frozen=True, slots=True)
class NodeFate:
    """What a plan does to one node: the pass's command that disrupts it, or why it stays (the first pass); with
    ``--until-stable``, the step whose command disrupts it (0 is the first pass), or None when it stays to the end."""

    node: str
    nodepool: str | None
    command: Command | None
    blocked_by: tuple[str, str] | None  # (method, reason) when the first pass leaves it
    step: int | None
    step_command: Command | None


def unknown_nodes(snapshot: Snapshot, names: Sequence[str]) -> list[str]:
    """The names that are no Node of the snapshot."""
    known = {n.name for n in snapshot.nodes}
    return [name for name in names if name not in known]


def fates(plan: Plan, snapshot: Snapshot, names: Sequence[str]) -> tuple[NodeFate, ...]:
    """What ``plan`` does to each of ``names`` (Nodes of ``snapshot``, the plan's input)."""
    pools = {n.name: n.nodepool for n in snapshot.nodes}
    out = []
    for name in dict.fromkeys(names):
        command = next((c for c in plan.first.commands if name in c.nodes), None)
        blocked = next(((b.method, b.reason) for b in plan.first.blocked if b.node == name), None)
        step, step_command = None, None
        for index, result in enumerate(plan.steps or ()):
            step_command = next((c for c in result.commands if name in c.nodes), None)
            if step_command is not None:
                step = index
                break
        out.append(NodeFate(name, pools.get(name), command, blocked, step, step_command))
    return tuple(out)


def only_nodes(plan: Plan, snapshot: Snapshot, names: Sequence[str]) -> Plan:
    """The plan as it concerns ``names`` (``ebb plan --node``): the commands that disrupt one of them (whole, with
    their other nodes), their own ``blocked`` entries and the budgets of their NodePools, in each step the
    commands that disrupt one of them. The cost stays the cluster's: a command's saving is the pass's."""
    wanted = set(names)
    pools = {n.nodepool for n in snapshot.nodes if n.name in wanted}

    def commands_of(result: PassResult) -> tuple[Command, ...]:
        return tuple(c for c in result.commands if wanted.intersection(c.nodes))

    first = replace(plan.first, commands=commands_of(plan.first),
                    blocked=tuple(b for b in plan.first.blocked if b.node in wanted),
                    budgets=tuple(b for b in plan.first.budgets if b.nodepool in pools))
    steps = None if plan.steps is None else tuple(replace(s, commands=commands_of(s)) for s in plan.steps)
    return Plan(first, steps, tuple(w for w in plan.warnings if w.nodepool is None or w.nodepool in pools), plan.final)


# -- the JSON contract (docs/plan.md) ----------------------------------------------------------------------


def _money(value: float) -> float:
    return round(value, 6) + 0.0  # + 0.0: a sum that cancels to a hair below zero prints 0.0, not -0.0


def command_json(command: Command) -> dict[str, Any]:
    return {
        "method": command.method,
        "reason": command.reason,
        "action": command.action,
        "nodes": list(command.nodes),
        "replacements": [{"nodePool": r.nodepool, "instanceTypes": list(r.instance_types),
                          "capacityType": r.capacity_type, "zones": list(r.zones), "price": _money(r.price),
                          **({"labels": dict(r.labels)} if r.labels else {})}
                         for r in command.replacements],
        "savingsPerHour": _money(command.savings),
        "explanation": command.explanation,
    }


def cost_json(result: PassResult) -> dict[str, float]:
    return {"before": _money(result.cost_before), "after": _money(result.cost_after)}


def plan_json(plan: Plan) -> dict[str, Any]:
    first = plan.first
    out: dict[str, Any] = {
        "now": fmt_time(first.now),
        "commands": [command_json(c) for c in first.commands],
        "blocked": [{"node": b.node, "method": b.method, "reason": b.reason} for b in first.blocked],
        "budgets": [{"nodePool": b.nodepool, "reason": b.reason, "allowed": b.allowed, "detail": b.detail}
                    for b in first.budgets],
        "cost": cost_json(first),
        "warnings": [conflict_json(w) for w in plan.warnings],
    }
    if plan.steps is not None:
        out["steps"] = [{"now": fmt_time(s.now), "commands": [command_json(c) for c in s.commands],
                         "cost": cost_json(s)} for s in plan.steps]
    return out


def summary(plan: Plan) -> Mapping[str, Any]:
    """A few headline figures, for the table view and logs."""
    final = plan.steps[-1].cost_after if plan.steps else plan.first.cost_after
    return {"commands": len(plan.first.commands), "blocked": len(plan.first.blocked),
            "cost_before": plan.first.cost_before, "cost_final": final,
            "steps": len(plan.steps) if plan.steps is not None else None}
