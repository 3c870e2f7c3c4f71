"""POST /v1/plan: `ebb plan -o json` on an uploaded snapshot or on the live cluster state (docs/plan.md).

The body is the YAML stream `kubectl get ... -o yaml` prints (application/yaml, text/yaml or
text/plain), or JSON: one kubectl document, a `kind: List`, an array of documents, or an envelope
``{"documents": [...] | "snapshot": "<yaml>", "now": ..., "untilStable": ..., "spotToSpot": ...}``.
A body that carries no snapshot (empty, or an envelope without documents and snapshot) asks for a plan
on the live state: the request says ``live`` and the caller supplies the live snapshot.
A plan on the live state runs with the cluster-wide engine options the planner reads (``ebb.core.options``) and the
leader planner's demand record (``ebb_decisions_api.passes.with_leader_demand``); one on an uploaded snapshot with
``ebb plan``'s defaults. Parsing and planning are CPU-bound and run in a worker thread, so the event loop keeps
answering.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from ebb.adapters.catalog import bundled_catalog
from ebb.core.methods.base import EngineOptions
from ebb.core.model import Snapshot
from ebb.core.plan import make_plan, only_nodes, plan_json, unknown_nodes
from ebb.core.quantity import TIME_EXAMPLE, parse_time
from ebb.core.snapshot import SnapshotError, parse_documents
from ebb.core.yaml_documents import InputError, iter_documents

JSON_TYPES = ("application/json",)
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml", "text/plain")
ENVELOPE_KEYS = {"documents", "snapshot", "now", "untilStable", "spotToSpot"}


class PlanInputError(ValueError):
    """Bad plan input; ``loc`` is where (as in FastAPI's 422 bodies)."""

    def __init__(self, loc: tuple[str, ...], message: str, kind: str = "value_error") -> None:
        super().__init__(message)
        self.loc = loc
        self.kind = kind


@dataclass(frozen=True, slots=True)
class PlanRequest:
    #: YAML text, or already-parsed documents
    yaml_text: str | None
    documents: list[Any] | None
    now: datetime | None
    until_stable: bool | None
    spot_to_spot: bool | None

    @property
    def live(self) -> bool:
        """No snapshot in the body: plan on the live cluster state."""
        return self.yaml_text is None and self.documents is None


def _as_utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def parse_now(value: Any, loc: tuple[str, ...]) -> datetime:
    if not isinstance(value, str):
        raise PlanInputError(loc, "must be an RFC 3339 time like 2026-11-23T18:30:00Z")
    try:
        return parse_time(value)
    except ValueError as exc:
        raise PlanInputError(loc, f"{value!r} is not an RFC 3339 time from 1970 to 2262 like {TIME_EXAMPLE}") from exc


def _flag(value: Any, loc: tuple[str, ...]) -> bool:
    if not isinstance(value, bool):
        raise PlanInputError(loc, "must be true or false")
    return value


def read_body(body: bytes, content_type: str) -> PlanRequest:
    """Split the body into documents (or YAML text) and the options it carries."""
    media = content_type.split(";", 1)[0].strip().lower()
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PlanInputError(("body",), "is not UTF-8 text") from exc
    if media and media not in YAML_TYPES and media not in JSON_TYPES and not media.endswith("+json"):
        raise PlanInputError(("header", "content-type"), f"{media!r} is not application/yaml, text/plain or "
                             "application/json")
    if not text.strip():
        return PlanRequest(None, None, None, None, None)  # no snapshot: the live state
    if media in JSON_TYPES or media.endswith("+json"):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise PlanInputError(("body",), f"is not valid JSON: {exc}", "json_invalid") from exc
        return _from_json(data)
    return PlanRequest(text, None, None, None, None)


def _from_json(data: Any) -> PlanRequest:
    if isinstance(data, list):
        return PlanRequest(None, data, None, None, None)
    if not isinstance(data, dict):
        raise PlanInputError(("body",), "must be a kubectl document, a list of them, or an envelope object")
    if "kind" in data:
        return PlanRequest(None, [data], None, None, None)
    unknown = sorted(data.keys() - ENVELOPE_KEYS)
    if unknown:
        raise PlanInputError(("body", unknown[0]), "is not a plan option (documents, snapshot, now, untilStable, "
                             "spotToSpot); a kubectl document needs a kind", "extra_forbidden")
    yaml_text: str | None = None
    documents: list[Any] | None = None
    if "snapshot" in data:
        if not isinstance(data["snapshot"], str):
            raise PlanInputError(("body", "snapshot"), "must be YAML text")
        yaml_text = data["snapshot"]
    if "documents" in data:
        if yaml_text is not None:
            raise PlanInputError(("body", "documents"), "give documents or snapshot, not both")
        if not isinstance(data["documents"], list):
            raise PlanInputError(("body", "documents"), "must be an array of kubectl documents")
        documents = data["documents"]
    return PlanRequest(
        yaml_text,
        documents,
        parse_now(data["now"], ("body", "now")) if "now" in data else None,
        _flag(data["untilStable"], ("body", "untilStable")) if "untilStable" in data else None,
        _flag(data["spotToSpot"], ("body", "spotToSpot")) if "spotToSpot" in data else None,
    )


def _documents(request: PlanRequest) -> Iterator[Any]:
    if request.documents is not None:
        for index, doc in enumerate(request.documents):
            if not isinstance(doc, dict):
                raise PlanInputError(("body", "documents", str(index)), "must be an object (a kubectl document)")
            yield doc
    elif request.yaml_text is not None:
        yield from iter_documents(io.StringIO(request.yaml_text), "body")


def plan_options(request: PlanRequest, spot_to_spot: bool | None, cluster: EngineOptions) -> EngineOptions:
    """The engine options of a plan: on the live state the cluster-wide ones (``cluster``, ``ebb.core.options``: the
    planner's), on an uploaded snapshot ``ebb plan``'s defaults; spot-to-spot as the body says, else as the query
    (``spot_to_spot``) says, else as those options say."""
    spot = request.spot_to_spot if request.spot_to_spot is not None else spot_to_spot
    options = cluster if request.live else EngineOptions()
    return options if spot is None else replace(options, spot_to_spot=spot)


def run_plan(request: PlanRequest, now: datetime, until_stable: bool, spot_to_spot: bool,
             nodes: Sequence[str] = ()) -> dict[str, Any]:
    """Parse and plan an uploaded snapshot with ``ebb plan``'s options (blocking; call it in a worker thread).
    Raises SnapshotError / InputError / PlanInputError for bad input."""
    documents: Iterable[Any] = _documents(request)
    snapshot = parse_documents(documents, bundled_catalog=bundled_catalog)
    return plan_snapshot(snapshot, now, until_stable, EngineOptions(spot_to_spot=spot_to_spot), nodes=nodes)


def plan_snapshot(snapshot: Snapshot, now: datetime, until_stable: bool, options: EngineOptions, *,
                  nodes: Sequence[str] = ()) -> dict[str, Any]:
    """The `ebb plan -o json` document of a parsed snapshot with ``options`` (blocking; call it in a worker
    thread); ``nodes`` cut it to what it does to those nodes, as ``ebb plan --node`` (a PlanInputError on ``node``
    names one that is no Node)."""
    missing = unknown_nodes(snapshot, nodes)
    if missing:
        raise PlanInputError(("query", "node"), f"no Node {', '.join(missing)} in the snapshot "
                                                f"({len(snapshot.nodes)} nodes)")
    # the conflicts the options refuse are the plan's warnings[] (ebb.core.conflicts), as ``ebb plan``'s
    plan = make_plan(snapshot, _as_utc(now), until_stable=until_stable, options=options,
                     conflict_settings=options.refuse_conflicts)
    return plan_json(only_nodes(plan, snapshot, nodes) if nodes else plan)


__all__ = ["InputError", "PlanInputError", "PlanRequest", "SnapshotError", "parse_now", "plan_options", "plan_snapshot",
           "read_body", "run_plan"]
