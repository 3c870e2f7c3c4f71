"""ebb's wire contracts: every topic, its key rule, its CloudEvent types and their payloads
(docs/architecture.md#topics, docs/topics.md).

This is the one place the schemas live. Each payload is a strict pydantic model (unknown fields are
rejected, names are camelCase on the wire, consistent with the ``ebb plan`` JSON) and every message
carries an ``id`` (a UUID, also the CloudEvent ``id``) so that a consumer can apply it once.
``ebb.contracts.codec`` maps the models to and from Kafka records (CloudEvents, binary content mode)
and ``ebb.contracts.asyncapi`` publishes them as deploy/asyncapi.yaml.

A decision (``ebb.core.decision.Decision``) maps to its command and its events here, and nowhere else:
``DisruptionCommand.of_decision`` / ``DisruptionCommand.decision``, and a step of it to its
``DisruptionEvent`` (``DisruptionEvent.step``, with the id its timeline row shares: ``event_id``). The leader
planner's pass maps to its ``PlannerPass`` here too (``PlannerPass.of_pass``): the one answer to "why not this
node?" that the decisions-api serves.

Pure: pydantic and the core's values only, no I/O.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Final, Literal, Self
from uuid import UUID, uuid4, uuid5

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)
from pydantic.alias_generators import to_camel

from ebb.core.decision import Decision, DecisionNode, State
from ebb.core.methods.base import Replacement as CoreReplacement
from ebb.core.model import DemandSample

if TYPE_CHECKING:
    from datetime import datetime

    from ebb.core.cluster import ClusterView
    from ebb.core.engine import PassResult
    from ebb.core.findings import Findings
    from ebb.core.methods.base import Command


class ContractError(ValueError):
    """A record or a message that breaks the contract; the message names what is wrong."""


# -- topics and CloudEvent types ----------------------------------------------------------------------------

TOPIC_CLUSTER_OBJECTS: Final = "ebb.cluster.objects"
TOPIC_INTERRUPTIONS: Final = "ebb.interruptions"
TOPIC_DISRUPTION_COMMANDS: Final = "ebb.disruption.commands"
TOPIC_DISRUPTION_EVENTS: Final = "ebb.disruption.events"
TOPIC_PLANNER_PASSES: Final = "ebb.planner.passes"
DLQ_SUFFIX: Final = ".dlq"

TYPE_OBJECT_UPSERTED: Final = "sh.ebb.object.upserted.v1"
TYPE_OBJECT_DELETED: Final = "sh.ebb.object.deleted.v1"
TYPE_KIND_SYNCED: Final = "sh.ebb.kind.synced.v1"
TYPE_INTERRUPTION_RECEIVED: Final = "sh.ebb.interruption.received.v1"
TYPE_COMMAND_APPROVED: Final = "sh.ebb.command.approved.v1"
TYPE_DISRUPTION_PROGRESSED: Final = "sh.ebb.disruption.progressed.v1"
TYPE_MESSAGE_DEADLETTERED: Final = "sh.ebb.message.deadlettered.v1"
TYPE_PASS_COMPLETED: Final = "sh.ebb.pass.completed.v1"
#: the largest ebb.planner.passes record: a pass names every node with its cause (about 300 bytes a node), so a
#: 10,000-node cluster's pass is about 3 MiB; Kafka's default record limit is 1 MiB
PASS_MAX_BYTES: Final = 64 * 1024 * 1024


def dlq_topic(topic: str) -> str:
    """The dead-letter topic of ``topic``."""
    return topic + DLQ_SUFFIX


def is_dlq_topic(topic: str) -> bool:
    return topic.endswith(DLQ_SUFFIX)


# -- field types --------------------------------------------------------------------------------------------

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
#: a Kubernetes object name that is a DNS-1123 subdomain (nodes, NodePools)
K8sName = Annotated[
    str, StringConstraints(min_length=1, max_length=253, pattern=rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")
]
#: any object name (some kinds allow more than a DNS subdomain), never containing the key separator
ObjectName = Annotated[str, StringConstraints(min_length=1, max_length=253, pattern=r"^[^/\s]+$")]
Namespace = Annotated[str, StringConstraints(max_length=63, pattern=rf"^({_DNS_LABEL})?$")]
Kind = Annotated[str, StringConstraints(min_length=1, max_length=63, pattern=r"^[A-Z][A-Za-z0-9]*$")]
Token = Annotated[str, StringConstraints(min_length=1, max_length=253, pattern=r"^\S+$")]
Text = Annotated[str, StringConstraints(max_length=4096)]
DecisionId = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^\S+$")]
Money = Annotated[float, Field(allow_inf_nan=False)]
Price = Annotated[float, Field(ge=0, allow_inf_nan=False)]

InterruptionKind = Literal["spot-interruption", "capacity-reservation-interruption", "scheduled-change", "state-change",
                           "rebalance"]
Method = Literal[
    "expiration", "drift", "emptiness", "multi-node-consolidation", "single-node-consolidation", "interruption"
]
Reason = Literal["Expired", "Drifted", "Empty", "Underutilized", "Interrupted"]
Action = Literal["delete", "replace"]
CapacityType = Literal["on-demand", "spot", "reserved"]
Phase = Literal[
    "Proposed", "Approved", "Rejected", "Tainted", "Launching", "WaitingReadiness", "Evicted", "Terminated",
    "RolledBack", "Failed",
]


class WireModel(BaseModel):
    """Strict, immutable, camelCase on the wire (Python code uses the snake_case names)."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        json_schema_serialization_defaults_required=True,
    )


class Message(WireModel):
    """A payload of one of ebb's topics."""

    #: the topic the message belongs on (dead letters: any ``<topic>.dlq``)
    TOPIC: ClassVar[str]
    #: its CloudEvent type
    TYPE: ClassVar[str]
    #: how its key is made, in words
    KEY_RULE: ClassVar[str]

    id: UUID = Field(default_factory=uuid4, description="Unique message id (= CloudEvent id); applied once.")

    def key(self) -> str:
        """The Kafka record key: it keeps per-object order."""
        raise NotImplementedError

    def ce_type(self) -> str:
        return self.TYPE


# -- ebb.cluster.objects ------------------------------------------------------------------------------------


class ClusterObject(Message):
    """The latest trimmed state of one watched object. ``object`` None is a deletion: on Kafka a
    tombstone (null value) of type ``sh.ebb.object.deleted.v1`` whose fields travel in the key and
    the headers (``ce_resourceversion``)."""

    TOPIC = TOPIC_CLUSTER_OBJECTS
    TYPE = TYPE_OBJECT_UPSERTED
    KEY_RULE = "kind/namespace/name (namespace empty for cluster-scoped objects, e.g. Node//node-a)"

    kind: Kind
    namespace: Namespace
    name: ObjectName
    resource_version: Annotated[str, StringConstraints(max_length=64)]
    object: dict[str, Any] | None = Field(description="The trimmed object; null when deleted (tombstone).")

    def key(self) -> str:
        return object_key(self.kind, self.namespace, self.name)

    def ce_type(self) -> str:
        return TYPE_OBJECT_DELETED if self.object is None else TYPE_OBJECT_UPSERTED

    @property
    def deleted(self) -> bool:
        return self.object is None


def object_key(kind: str, namespace: str, name: str) -> str:
    return f"{kind}/{namespace}/{name}"


#: the key prefix of `KindSynced` (no Kubernetes kind is named so)
KIND_SYNCED_KEY: Final = "KindSynced"


class KindSynced(Message):
    """The cluster-watcher has published its first list of ``kind``: every object of it the apiserver had (none where
    the kind is not served), so a view rebuilt from the topic holds the whole kind from here on. ``watched``: every
    kind that watcher lists and watches. A planner plans only once each watched kind is synced (Karpenter's
    disruption waits for its cluster state to be synced, ``Cluster.Synced``): before, a kind missing from its view
    (the Holds, the PodDisruptionBudgets, a node's pods) would look like a kind with no objects."""

    TOPIC = TOPIC_CLUSTER_OBJECTS
    TYPE = TYPE_KIND_SYNCED
    KEY_RULE = "KindSynced//kind"

    kind: Kind
    watched: tuple[Kind, ...] = Field(min_length=1, max_length=64)

    def key(self) -> str:
        return object_key(KIND_SYNCED_KEY, "", self.kind)


# -- ebb.interruptions --------------------------------------------------------------------------------------


class Interruption(Message):
    """The cloud is about to take a node away (or recommends rebalancing it)."""

    TOPIC = TOPIC_INTERRUPTIONS
    TYPE = TYPE_INTERRUPTION_RECEIVED
    KEY_RULE = "node name"

    node: K8sName
    kind: InterruptionKind
    instance_id: Token
    deadline: AwareDatetime | None = Field(description="When the instance goes away; null when unknown.")
    detail: Text = Field(description="The cloud's words, for people (e.g. instance-action=terminate); "
                               "nothing decides on it.")
    instance_state: Token | None = Field(
        default=None, description="The instance's new state, for a state-change (stopping, stopped, shutting-down, "
                                  "terminated); null for the other kinds.")

    def key(self) -> str:
        return self.node


# -- ebb.disruption.commands --------------------------------------------------------------------------------


class Replacement(WireModel):
    """A node to launch before the disrupted ones go (as in ``ebb plan``)."""

    node_pool: K8sName
    instance_types: tuple[Token, ...] = Field(min_length=1, description="Cheapest first.")
    capacity_type: CapacityType
    zones: tuple[Token, ...] = Field(min_length=1)
    price: Price = Field(description="Hourly price of instanceTypes[0].")
    labels: dict[Token, Token] = Field(
        default_factory=dict, description="Labels to launch the node with: the values the NodePool's custom "
                                          "requirements with several values take for the pods it is for.")

    @classmethod
    def of(cls, r: CoreReplacement) -> Replacement:
        return cls.model_validate({"node_pool": r.nodepool, "instance_types": r.instance_types,
                                   "capacity_type": r.capacity_type, "zones": r.zones, "price": round(r.price, 6),
                                   "labels": dict(r.labels)})

    def core(self) -> CoreReplacement:
        return CoreReplacement(nodepool=self.node_pool, instance_types=self.instance_types,
                               capacity_type=self.capacity_type, zones=self.zones, price=self.price,
                               labels=tuple(sorted(self.labels.items())))


class DisruptionCommand(Message):
    """An approved disruption for the termination executor."""

    TOPIC = TOPIC_DISRUPTION_COMMANDS
    TYPE = TYPE_COMMAND_APPROVED
    KEY_RULE = "nodepool name (the pool whose budget the command consumes)"

    decision_id: DecisionId
    node_pool: K8sName
    method: Method
    reason: Reason
    action: Action
    nodes: tuple[K8sName, ...] = Field(min_length=1)
    replacements: tuple[Replacement, ...]
    savings_per_hour: Money
    explanation: Text
    approved_at: AwareDatetime
    message_kind: Token | None = Field(
        default=None, description="An interruption's kind as Karpenter's AWS provider names it (spot_interrupted, "
                                  "capacity_reservation_interrupted, scheduled_change, instance_stopped, "
                                  "instance_terminated): the reason ebb_nodeclaims_disrupted_total counts its node "
                                  "under; null for the other methods.")

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if (self.action == "replace") != bool(self.replacements):
            raise ValueError("action 'replace' needs replacements and 'delete' must have none")
        if len(set(self.nodes)) != len(self.nodes):
            raise ValueError("nodes must be distinct")
        return self

    def key(self) -> str:
        return self.node_pool

    @classmethod
    def from_command(
        cls,
        command: Command,
        *,
        decision_id: str,
        node_pool: str,
        approved_at: datetime,
        id: UUID | None = None,
    ) -> DisruptionCommand:
        """The wire form of an engine command (``ebb.core.methods.base.Command``)."""
        return cls.model_validate(
            {
                **({"id": id} if id is not None else {}),
                "decision_id": decision_id,
                "node_pool": node_pool,
                "method": command.method,
                "reason": command.reason,
                "action": command.action,
                "nodes": command.nodes,
                "replacements": [Replacement.of(r) for r in command.replacements],
                "savings_per_hour": round(command.savings, 6),
                "explanation": command.explanation,
                "approved_at": approved_at,
            }
        )

    @classmethod
    def of_decision(cls, decision: Decision, *, id: UUID | None = None) -> DisruptionCommand:
        """The command of an approved decision (ValueError when it has not been approved, or breaks the
        contract)."""
        if decision.approved_at is None:
            raise ValueError(f"decision {decision.id} is {decision.state}, not approved")
        return cls.model_validate(
            {
                **({"id": id} if id is not None else {}),
                "decision_id": decision.id,
                "node_pool": decision.node_pool,
                "method": decision.method,
                "reason": decision.reason,
                "action": decision.action,
                "nodes": decision.node_names,
                "replacements": [Replacement.of(r) for r in decision.replacements],
                "savings_per_hour": round(decision.savings, 6),
                "explanation": decision.text[:4096],
                "approved_at": decision.approved_at,
                "message_kind": (decision.explanation.get("interruption") or {}).get("messageKind"),
            }
        )

    def decision(self, now: datetime) -> Decision:
        """The approved decision this command carries out (for an executor that has no row of it)."""
        return Decision(
            id=self.decision_id, method=self.method, reason=self.reason, action=self.action,
            nodes=tuple(DecisionNode(n, self.node_pool) for n in self.nodes),
            replacements=tuple(r.core() for r in self.replacements), savings=self.savings_per_hour,
            state=State.APPROVED, created_at=now, updated_at=now,
            explanation={"text": self.explanation,
                         **({"interruption": {"messageKind": self.message_kind}} if self.message_kind else {})},
            approved_at=self.approved_at,
        )


# -- ebb.disruption.events ----------------------------------------------------------------------------------


#: namespace of the ids of the steps that happen once per decision and node
EVENT_IDS: Final = UUID("6f1d3c2e-52a8-4b0e-9a51-4f0f3f6a7e21")
#: the phases that happen once per decision and node (a command has one wait for its replacements, reported on
#: its first node; Launching happens once per replacement and is keyed by the replacement's name)
ONCE_PER_NODE: Final[frozenset[str]] = frozenset(
    {"Proposed", "Approved", "Rejected", "Tainted", "WaitingReadiness", "Evicted", "Terminated", "RolledBack",
     "Failed"}
)


def event_id(decision_id: str, node: str, phase: str, key: str | None = None) -> UUID:
    """The id of a decision's ``phase`` on ``node``: the ``DisruptionEvent``'s and its ``decision_events`` row's.

    For the steps that happen once per decision and node, and for those named by a ``key`` (a Launching by the
    replacement it launches, whose name is derived from the decision), it is derived from them (a UUIDv5), so
    the planner's store and its publish name one step by one id, and a command carried out again after a crash
    or a retry reports the step under the same id (one timeline entry; subscribers applying ids once see it
    once). Any other step gets a fresh id."""
    if key is not None:
        return uuid5(EVENT_IDS, f"{decision_id}/{node}/{phase}/{key}")
    if phase in ONCE_PER_NODE:
        return uuid5(EVENT_IDS, f"{decision_id}/{node}/{phase}")
    return uuid4()


class DisruptionEvent(Message):
    """One step of a decision's lifecycle on one node."""

    TOPIC = TOPIC_DISRUPTION_EVENTS
    TYPE = TYPE_DISRUPTION_PROGRESSED
    KEY_RULE = "node name"

    decision_id: DecisionId
    node: K8sName
    phase: Phase
    message: Text
    at: AwareDatetime

    def key(self) -> str:
        return self.node

    @classmethod
    def step(cls, decision_id: str, node: str, phase: Phase, message: str, at: datetime, *,
             key: str | None = None) -> DisruptionEvent:
        """The event of a decision's ``phase`` on ``node`` (``key``: which of several, e.g. the replacement a
        Launching launches), under its ``event_id`` (the message cut to the contract's length)."""
        return cls(id=event_id(decision_id, node, phase, key), decision_id=decision_id, node=node, phase=phase,
                   message=message[:4096], at=at)


# -- ebb.planner.passes -------------------------------------------------------------------------------------


def _text(value: str) -> str:
    return value[:4096]


class PassCommand(WireModel):
    """A command of the pass: what it would disrupt now (the planner proposes it unless its nodes are busy)."""

    @model_validator(mode="after")
    def _aligned(self) -> Self:
        if len(self.node_pools) != len(self.nodes):
            raise ValueError("nodePools must name the NodePool of each node")
        return self

    method: Method
    reason: Reason
    action: Action
    nodes: tuple[ObjectName, ...] = Field(min_length=1)
    node_pools: tuple[str | None, ...] = Field(description="The NodePool of each node, in the order of nodes.")
    replacements: tuple[Replacement, ...]
    savings_per_hour: Money
    explanation: Text


class PassBlocked(WireModel):
    """A node the pass leaves alone: which method said why (or ``all``), the cause's kind and its sentence."""

    node: ObjectName
    node_pool: str | None = Field(description="The node's NodePool; null when no NodePool owns it.")
    method: Annotated[str, StringConstraints(min_length=1, max_length=63)]
    cause: Annotated[str, StringConstraints(min_length=1, max_length=63)] = Field(
        description="The cause's kind (``ebb.core.causes.Cause``), e.g. demand-window.")
    reason: Text = Field(description="The cause's sentence: ``blocked[].reason`` of ``ebb plan``.")
    paused: Text | None = Field(description="Why Empty and Underutilized disruption of the node is paused (a hold, "
                                            "a stabilization window); null when it is not.")


class PassFinding(WireModel):
    """A finding of the pass (``ebb.core.findings``): Expired, Drifted, Empty or Consolidatable, since when."""

    node: ObjectName
    kind: Literal["Expired", "Drifted", "Empty", "Consolidatable"]
    reason: Text
    since: AwareDatetime | None


class PassBudget(WireModel):
    """A NodePool's budget for one reason at the pass: the disruptions it allows now."""

    node_pool: str
    reason: Annotated[str, StringConstraints(min_length=1, max_length=63)]
    allowed: int
    detail: Text
    invalid: bool


class PassPool(WireModel):
    """A NodePool as the pass saw it: where its disruption settings come from."""

    node_pool: str
    policy: Annotated[str, StringConstraints(max_length=512)] = Field(
        description="The object the settings come from: ``NodePool X`` or ``DisruptionPolicy X``.")


class PassDemand(WireModel):
    """A sample of the leader's demand record (``ebb.core.demand.recorded``): what a NodePool's pods requested."""

    node_pool: str
    at: AwareDatetime
    cpu: int = Field(ge=0, description="Millicores.")
    memory: int = Field(ge=0, description="Bytes.")


class PlannerPass(Message):
    """The leader planner's last computed pass: what it disrupts, why it leaves every other node alone, its
    findings, budgets and demand record, at the pass's time. The decisions-api answers "why not this node?" from
    it."""

    TOPIC = TOPIC_PLANNER_PASSES
    TYPE = TYPE_PASS_COMPLETED
    KEY_RULE = "cluster name (compacted: the latest pass per cluster)"

    cluster: Token
    at: AwareDatetime = Field(description="The pass's now: the moment the engine decided at.")
    revision: int = Field(ge=0, description="The leader's count of cluster-object changes applied when it built the "
                                            "pass's snapshot: passes of one leader with the same revision saw the "
                                            "same objects.")
    revisit_at: AwareDatetime | None = Field(description="When a pass over the same snapshot could first decide "
                                                         "differently; null when nothing changes with time alone.")
    commands: tuple[PassCommand, ...]
    blocked: tuple[PassBlocked, ...]
    findings: tuple[PassFinding, ...]
    budgets: tuple[PassBudget, ...]
    pools: tuple[PassPool, ...]
    demand: tuple[PassDemand, ...] = Field(description="The demand record the pass planned with (after its own "
                                                       "sample), which on-demand plans of the live state take.")

    def key(self) -> str:
        return self.cluster

    @classmethod
    def of_pass(cls, *, cluster: str, view: ClusterView, result: PassResult, found: Findings, revision: int,
                demand: tuple[DemandSample, ...]) -> PlannerPass:
        """The message of one computed pass: its ``result`` over ``view``, the planner's held findings ``found``
        (first-seen times filled in), the objects ``revision`` it planned on and the demand record it keeps."""
        nodes = view.snapshot.nodes
        pools = {n.name: n.nodepool for n in nodes}
        by_name = {n.name: n for n in nodes}
        return cls.model_validate({
            "cluster": cluster,
            "at": result.now,
            "revision": revision,
            "revisit_at": result.revisit_at,
            "commands": [
                {"method": c.method, "reason": c.reason, "action": c.action, "nodes": c.nodes,
                 "node_pools": [pools.get(n) for n in c.nodes],
                 "replacements": [Replacement.of(r) for r in c.replacements],
                 "savings_per_hour": round(c.savings, 6), "explanation": _text(c.explanation)}
                for c in result.commands],
            "blocked": [
                {"node": b.node, "node_pool": pools.get(b.node), "method": b.method, "cause": str(b.cause.kind),
                 "reason": _text(b.reason), "paused": _paused(view, by_name.get(b.node))}
                for b in result.blocked],
            "findings": [{"node": f.node, "kind": f.kind, "reason": _text(f.reason), "since": f.since}
                         for name in sorted(found) for f in found[name]],
            "budgets": [{"node_pool": b.nodepool, "reason": b.reason, "allowed": b.allowed, "detail": _text(b.detail),
                         "invalid": b.invalid} for b in result.budgets],
            "pools": [{"node_pool": p.name, "policy": p.policy_source} for p in view.pools.values()],
            "demand": [{"node_pool": s.pool, "at": s.at, "cpu": s.cpu, "memory": s.memory} for s in demand],
        })

    def demand_record(self) -> tuple[DemandSample, ...]:
        """The demand record as the core keeps it (``Snapshot.demand``)."""
        return tuple(DemandSample(s.node_pool, s.at, s.cpu, s.memory) for s in self.demand)


def _paused(view: ClusterView, node: Any) -> str | None:
    cause = view.paused(node) if node is not None else None
    return _text(cause.text) if cause is not None else None


# -- <topic>.dlq --------------------------------------------------------------------------------------------


class RawBytes(WireModel):
    """Bytes as they were received: UTF-8 text when they decode, base64 otherwise."""

    encoding: Literal["utf-8", "base64"]
    data: str

    @classmethod
    def of(cls, raw: bytes) -> RawBytes:
        try:
            return cls(encoding="utf-8", data=raw.decode("utf-8"))
        except UnicodeDecodeError:
            return cls(encoding="base64", data=base64.b64encode(raw).decode("ascii"))

    @model_validator(mode="after")
    def _decodable(self) -> Self:
        if self.encoding == "base64":
            try:
                base64.b64decode(self.data, validate=True)
            except binascii.Error as e:
                raise ValueError(f"data is not base64: {e}") from e
        return self

    def to_bytes(self) -> bytes:
        if self.encoding == "base64":
            return base64.b64decode(self.data)
        return self.data.encode("utf-8")


class RawHeader(WireModel):
    name: str
    value: RawBytes | None


class DeadLetter(Message):
    """A record a consumer could not parse (``malformed``) or apply (``poison``), kept with the error."""

    TOPIC = "<topic>" + DLQ_SUFFIX
    TYPE = TYPE_MESSAGE_DEADLETTERED
    KEY_RULE = "the original key as text when it is non-empty UTF-8, otherwise topic/partition/offset"

    topic: Annotated[str, StringConstraints(min_length=1, max_length=249)]
    partition: int = Field(ge=0)
    offset: int = Field(ge=0)
    key_bytes: RawBytes | None = Field(validation_alias="key", serialization_alias="key")
    headers: tuple[RawHeader, ...]
    value: RawBytes | None
    cause: Literal["malformed", "poison"]
    error: Annotated[str, StringConstraints(min_length=1)]
    group: str = Field(description="The consumer group that gave up on the record.")
    failed_at: AwareDatetime

    def key(self) -> str:
        # an empty key cannot be a CloudEvent's subject: dead-lettering a record with one used to fail, and
        # the consumer with it (found by tests/property/test_fuzz_records.py)
        if self.key_bytes is not None and self.key_bytes.encoding == "utf-8" and self.key_bytes.data:
            return self.key_bytes.data
        return f"{self.topic}/{self.partition}/{self.offset}"

    @classmethod
    def of_record(
        cls,
        *,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: tuple[tuple[str, bytes | None], ...] | list[tuple[str, bytes | None]],
        cause: Literal["malformed", "poison"],
        error: str,
        group: str,
        failed_at: datetime,
    ) -> DeadLetter:
        return cls(
            topic=topic,
            partition=partition,
            offset=offset,
            key_bytes=None if key is None else RawBytes.of(key),
            headers=tuple(RawHeader(name=n, value=None if v is None else RawBytes.of(v)) for n, v in headers),
            value=None if value is None else RawBytes.of(value),
            cause=cause,
            error=error or "(no message)",
            group=group,
            failed_at=failed_at,
        )

    def original(self) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
        """The original record's key, value and headers (to inspect or re-publish it)."""
        return (
            None if self.key_bytes is None else self.key_bytes.to_bytes(),
            None if self.value is None else self.value.to_bytes(),
            [(h.name, None if h.value is None else h.value.to_bytes()) for h in self.headers],
        )


# -- the registry -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TopicSpec:
    name: str
    key: str
    producers: str
    consumers: str
    description: str
    #: CloudEvent type → payload model
    types: Mapping[str, type[Message]] = field(default_factory=dict)
    compacted: bool = False
    #: the largest record the topic takes, when above Kafka's default of 1 MiB (a pass names every node)
    max_message_bytes: int | None = None


TOPICS: Final[Mapping[str, TopicSpec]] = {
    spec.name: spec
    for spec in (
        TopicSpec(
            TOPIC_CLUSTER_OBJECTS,
            ClusterObject.KEY_RULE,
            "cluster-watcher",
            "all",
            "Compacted: the latest trimmed object per key, a tombstone on delete; consumers rebuild the "
            "cluster snapshot from it on start. Beside them, one KindSynced per watched kind (key KindSynced//kind) "
            "once the watcher has published that kind's first list.",
            {TYPE_OBJECT_UPSERTED: ClusterObject, TYPE_OBJECT_DELETED: ClusterObject, TYPE_KIND_SYNCED: KindSynced},
            compacted=True,
        ),
        TopicSpec(
            TOPIC_INTERRUPTIONS,
            Interruption.KEY_RULE,
            "interruption-ingester",
            "consolidation-planner",
            "Spot interruptions, scheduled changes, stopping/terminating state changes and rebalance "
            "recommendations.",
            {TYPE_INTERRUPTION_RECEIVED: Interruption},
        ),
        TopicSpec(
            TOPIC_DISRUPTION_COMMANDS,
            DisruptionCommand.KEY_RULE,
            "consolidation-planner",
            "termination-executor",
            "Approved disruption commands (id, decision, method, reason, nodes, replacements).",
            {TYPE_COMMAND_APPROVED: DisruptionCommand},
        ),
        TopicSpec(
            TOPIC_DISRUPTION_EVENTS,
            DisruptionEvent.KEY_RULE,
            "termination-executor, consolidation-planner",
            "anyone (decisions-api, subscribers)",
            "Decision lifecycle per node: Proposed, Approved, Rejected, Tainted, Launching, WaitingReadiness, "
            "Evicted, Terminated, RolledBack, Failed.",
            {TYPE_DISRUPTION_PROGRESSED: DisruptionEvent},
        ),
        TopicSpec(
            TOPIC_PLANNER_PASSES,
            PlannerPass.KEY_RULE,
            "consolidation-planner (the leader)",
            "decisions-api",
            "Compacted: the leader planner's last pass per cluster (its commands, why every other node is left "
            "alone, findings, budgets, demand record, time and revision); the decisions-api answers why-not "
            "questions from it.",
            {TYPE_PASS_COMPLETED: PlannerPass},
            compacted=True,
            max_message_bytes=PASS_MAX_BYTES,
        ),
    )
}

#: CloudEvent type → payload model, over all topics (dead letters included)
MESSAGE_TYPES: Final[Mapping[str, type[Message]]] = {
    **{t: m for spec in TOPICS.values() for t, m in spec.types.items()},
    TYPE_MESSAGE_DEADLETTERED: DeadLetter,
}


def topic_spec(topic: str) -> TopicSpec:
    """The spec of a topic, ``<topic>.dlq`` of a known topic included."""
    if topic in TOPICS:
        return TOPICS[topic]
    base = topic.removesuffix(DLQ_SUFFIX)
    if is_dlq_topic(topic) and base in TOPICS:
        return TopicSpec(
            topic,
            DeadLetter.KEY_RULE,
            "any consumer of " + base,
            "operators",
            f"Records of {base} that failed to parse or to apply, with the error.",
            {TYPE_MESSAGE_DEADLETTERED: DeadLetter},
            # a dead letter holds the whole record
            max_message_bytes=TOPICS[base].max_message_bytes,
        )
    raise ContractError(f"unknown topic {topic!r} (known: {', '.join(TOPICS)} and their {DLQ_SUFFIX} topics)")


def check_topic(topic: str, message: Message) -> None:
    """Raise ContractError unless ``message`` may be published on ``topic``."""
    spec = topic_spec(topic)
    if message.ce_type() not in spec.types:
        raise ContractError(
            f"a {type(message).__name__} ({message.ce_type()}) does not belong on topic {topic!r} "
            f"(allowed: {', '.join(spec.types)})"
        )
