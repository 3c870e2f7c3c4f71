"""Request and response bodies of the /v1 API (camelCase on the wire, as in the CLI's JSON)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, BeforeValidator, ConfigDict, Field
from pydantic.alias_generators import to_camel

from ebb.adapters.store.models import Decision, DecisionEvent, Hold
from ebb.core.decision import State

#: API scope → the store's scope_kind
SCOPE_TO_STORE: dict[str, str] = {"cluster": "cluster", "nodePool": "nodepool", "node": "node"}
STORE_TO_SCOPE: dict[str, str] = {v: k for k, v in SCOPE_TO_STORE.items()}
#: Kubernetes object names are at most 253 characters
NAME_MAX = 253
#: a decision's state: the lifecycle's own enum (``ebb.core.decision.State``)
DecisionState = State


#: the shape of an RFC 3339 date-time (an offset or Z; without one the API takes UTC where it says so)
_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:?\d{2})?")


def _date_time_text(value: Any) -> Any:
    """Only text that spells a date and a time: pydantic alone also takes a number (seconds since 1970) or a
    bare date, which the OpenAPI document's ``format: date-time`` does not allow (the fuzzer found both)."""
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not _DATE_TIME.fullmatch(value.strip()):
        raise ValueError("must be an RFC 3339 time like 2026-11-23T18:30:00Z")
    return value


#: a date-time parameter or field: RFC 3339 text
DateTime = Annotated[datetime, BeforeValidator(_date_time_text)]
#: a date-time field that must carry its offset
AwareDateTime = Annotated[AwareDatetime, BeforeValidator(_date_time_text)]


class Wire(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class _HoldFields(Wire):
    #: when the hold ends (RFC 3339 with an offset); absent: until deleted. It must be after the API's now, which
    #: ``POST /v1/holds`` checks: the API's clock is the simulated one in the embedded mode
    expires_at: AwareDateTime | None = None
    reason: str = Field(min_length=1, max_length=2000)


class ClusterHold(_HoldFields):
    """A hold on the whole cluster: it has no target (absent, null or empty)."""

    scope: Literal["cluster"]
    target: Literal[""] | None = None


class NodePoolHold(_HoldFields):
    """A hold on one NodePool, named by ``target`` (one the live cluster state has)."""

    scope: Literal["nodePool"]
    target: str = Field(min_length=1, max_length=NAME_MAX)


class NodeHold(_HoldFields):
    """A hold on one node, named by ``target``."""

    scope: Literal["node"]
    target: str = Field(min_length=1, max_length=NAME_MAX)


#: a consolidation hold: pauses Empty and Underutilized disruptions in its scope until it expires. A union
#: discriminated by ``scope``, so the OpenAPI document says which scopes need a target (a node-scoped hold
#: without one was a 422 its schema allowed)
HoldCreate = Annotated[ClusterHold | NodePoolHold | NodeHold, Field(discriminator="scope")]


class HoldOut(Wire):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    id: str
    scope: str
    target: str | None
    reason: str
    #: manual (made over this API), automatic (left by a failed decision) or object (an ebb.sh/v1 Hold object of
    #: the cluster, made and deleted with kubectl)
    kind: str
    created_by: str | None
    #: None for a Hold object whose metadata has no creationTimestamp
    created_at: datetime | None
    expires_at: datetime | None
    active: bool

    @classmethod
    def of(cls, hold: Hold, now: datetime) -> HoldOut:
        return cls(
            id=hold.id,
            scope=STORE_TO_SCOPE.get(hold.scope_kind, hold.scope_kind),
            target=hold.scope or None,
            reason=hold.reason,
            kind=hold.kind,
            created_by=hold.created_by,
            created_at=hold.created_at,
            expires_at=hold.expires_at,
            active=hold.in_force(now),
        )


#: whether a list of holds has the cluster's Hold objects: ``listed``; ``loading`` while the API has not read the
#: cluster state to its end yet, ``invalid`` while that state is not a valid snapshot (then the store's holds only)
ClusterHolds = Literal["listed", "loading", "invalid"]


class HoldList(Wire):
    items: list[HoldOut]
    cluster_holds: ClusterHolds = "listed"


class DecisionOut(Wire):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    id: str
    cluster: str
    method: str
    reason: str
    action: str
    nodes: list[Any]
    replacements: list[Any]
    savings_per_hour: float | None
    state: DecisionState
    explanation: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    approved_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    #: a shadow decision (docs/shadow.md): what ebb in shadow mode would have done; never executed
    shadow: bool = False

    @classmethod
    def fields_of(cls, d: Decision) -> dict[str, Any]:
        return {
            "id": d.id,
            "cluster": d.cluster,
            "method": d.method,
            "reason": d.reason,
            "action": d.action,
            "nodes": d.nodes,
            "replacements": d.replacements,
            "savings_per_hour": None if d.savings is None else float(d.savings),
            "state": d.state,
            "explanation": d.explanation,
            "created_at": d.created_at,
            "updated_at": d.updated_at,
            "approved_at": d.approved_at,
            "started_at": d.started_at,
            "finished_at": d.finished_at,
            "shadow": bool(d.shadow),
        }

    @classmethod
    def of(cls, d: Decision) -> DecisionOut:
        return cls(**cls.fields_of(d))


class DecisionList(Wire):
    items: list[DecisionOut]
    #: pass as ?cursor= for the next page; null on the last page
    next_cursor: str | None


class TimelineEntry(Wire):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    type: str
    at: datetime
    node: str | None
    event_id: str
    detail: dict[str, Any]

    @classmethod
    def of(cls, e: DecisionEvent) -> TimelineEntry:
        return cls(type=e.type, at=e.at, node=e.node, event_id=e.event_id, detail=e.detail)


class DecisionDetail(DecisionOut):
    #: the decision's events, oldest first
    timeline: list[TimelineEntry]


def utc_now() -> datetime:
    return datetime.now(UTC)
