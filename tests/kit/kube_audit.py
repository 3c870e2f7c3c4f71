"""What ebb sent to the API server, and whether it kept its hands off Karpenter's marks: the API server's audit
log (deploy/local/kubernetes.sh writes every create, update, patch and delete of a Node or a NodeClaim, with
its body, and every eviction) read back, and every version of every Node (a watch), so that each patch of
ebb's can be checked against the Node it was applied to.

ebb's services name themselves in their User-Agent (``ebb-termination-executor/<version>``, ...;
``ebb.adapters.kube.client``), so the log tells their requests from Karpenter's, the controllers' and the
test's own. This is the check of the karpenter mode's promise (docs/karpenter.md): ebb never adds or removes
a ``karpenter.sh/`` taint or finalizer and never deletes or creates a Node; its only Node writes are its own
taint ``ebb.sh/disrupted`` (a JSON patch of ``spec.taints`` guarded by the resourceVersion it read, with the label
``node.kubernetes.io/exclude-from-external-load-balancers: ebb`` in the same patch) and the planner's ``ebb.sh/``
annotations (a merge patch); its NodeClaims are created (with ``ebb.sh/decision-id``)
and deleted, never changed. The check reads what was sent, not only the end state, so a mark removed and put
back, or removed and then removed by Karpenter anyway, is still caught.

- ``AuditLog(path)``: ``mark()`` is the log's current end; ``events(since)`` the completed requests after it.
- ``NodeHistory(api)``: ``async with`` it around the time ebb runs; ``at(name, resource_version)``.
- ``ebb_violations(events, history)``: every request of ebb's that breaks those rules, in words.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self

from kubernetes_asyncio import client, watch

#: the User-Agent of ebb's components: ``ebb/<version>`` or ``ebb-<service>/<version>``
EBB_AGENT = re.compile(r"^ebb(-[a-z-]+)?/")
KARPENTER_PREFIX = "karpenter.sh/"
#: the only taint ebb may add or remove next to Karpenter
EBB_TAINT = ("ebb.sh/disrupted", "NoSchedule")
#: the only label ebb may add or remove, in the taint's patch, and the value it puts
EXCLUDE_LABEL = "node.kubernetes.io/exclude-from-external-load-balancers"
EXCLUDED_BY = "ebb"
ANNOTATION_DECISION_ID = "ebb.sh/decision-id"


@dataclass(frozen=True)
class AuditEvent:
    """One completed request as the audit log has it."""

    verb: str
    resource: str
    subresource: str
    namespace: str
    name: str
    user_agent: str
    code: int
    #: the request body (a patch: the patch itself; level Metadata: None)
    body: Any
    at: str

    @classmethod
    def parse(cls, line: Mapping[str, Any]) -> AuditEvent:
        ref = line.get("objectRef") or {}
        body = line.get("requestObject")
        name = str(ref.get("name") or "")
        if not name and isinstance(body, Mapping):  # a create names the object in its body
            name = str((body.get("metadata") or {}).get("name") or "")
        return cls(verb=str(line.get("verb", "")), resource=str(ref.get("resource", "")),
                   subresource=str(ref.get("subresource") or ""), namespace=str(ref.get("namespace") or ""),
                   name=name, user_agent=str(line.get("userAgent", "")),
                   code=int((line.get("responseStatus") or {}).get("code") or 0), body=body,
                   at=str(line.get("stageTimestamp", "")))

    @property
    def by_ebb(self) -> bool:
        return EBB_AGENT.match(self.user_agent) is not None

    @property
    def component(self) -> str:
        """The User-Agent's product: ``ebb-termination-executor``, ``karpenter``, ``kube-controller-manager``."""
        return self.user_agent.split("/", 1)[0]

    @property
    def ok(self) -> bool:
        return 200 <= self.code < 300

    def __str__(self) -> str:
        what = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        return f"{self.component} {self.verb} {what} {self.namespace + '/' if self.namespace else ''}{self.name} " \
               f"-> {self.code}"


class AuditLog:
    """The API server's audit log file (JSON lines)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def mark(self) -> int:
        """The log's current end: ``events(since=mark)`` are the requests completed after now."""
        return self.path.stat().st_size if self.path.exists() else 0

    def events(self, since: int = 0) -> list[AuditEvent]:
        """The completed requests (stage ResponseComplete) logged after ``since``, dry runs left out (a half-written
        last line is left for the next read)."""
        if not self.path.exists():
            return []
        with self.path.open("rb") as f:
            f.seek(since)
            data = f.read()
        out: list[AuditEvent] = []
        for raw in data.split(b"\n")[:-1]:
            line = json.loads(raw)
            # a dry run (the executor's dry-run Evictions before it taints) is answered as the request would be
            # and changes nothing: not a request of what was done
            if line.get("stage") == "ResponseComplete" and "dryRun=" not in str(line.get("requestURI", "")):
                out.append(AuditEvent.parse(line))
        return out


class NodeHistory:
    """Every version of every Node from ``__aenter__`` to ``__aexit__``: a list, then a watch from its
    resourceVersion (every change is an event). An expired watch (410) fails the run loudly: a missed version
    would leave a patch unchecked."""

    def __init__(self, api: Any) -> None:
        self.core = client.CoreV1Api(api)
        self._versions: dict[str, dict[str, dict[str, Any]]] = {}
        self._task: asyncio.Task[None] | None = None

    def at(self, name: str, resource_version: str) -> dict[str, Any] | None:
        """Node ``name`` as it was at ``resource_version`` (None: never seen at that version)."""
        return self._versions.get(name, {}).get(resource_version)

    def seen(self, name: str) -> bool:
        return name in self._versions

    def names(self) -> list[str]:
        """Every Node seen, by name."""
        return sorted(self._versions)

    def versions(self, name: str) -> list[dict[str, Any]]:
        """Every version of Node ``name`` seen."""
        return list(self._versions.get(name, {}).values())

    def _record(self, node: Mapping[str, Any]) -> str:
        meta = node.get("metadata") or {}
        version = str(meta.get("resourceVersion"))
        self._versions.setdefault(str(meta.get("name")), {})[version] = dict(node)
        return version

    async def _watch(self, version: str) -> None:
        while True:
            stream = watch.Watch()
            async with stream:
                async for event in stream.stream(self.core.list_node, resource_version=version,
                                                 timeout_seconds=60, allow_watch_bookmarks=True):
                    raw = event["raw_object"]
                    if event["type"] == "BOOKMARK":
                        version = str(raw["metadata"]["resourceVersion"])
                        continue
                    version = self._record(raw)

    async def __aenter__(self) -> Self:
        core: Any = self.core  # the raw JSON: outside the client's typed signature
        listed = await core.list_node(_preload_content=False)
        body = json.loads(await listed.read())
        for node in body.get("items") or []:
            self._record(node)
        self._task = asyncio.create_task(self._watch(str(body["metadata"]["resourceVersion"])))
        return self

    def check(self) -> None:
        """Raise what ended the watch, if it ended."""
        if self._task is not None and self._task.done() and not self._task.cancelled():
            self._task.result()
            raise AssertionError("the Node watch ended")

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task


# -- the rules (pure) -------------------------------------------------------------------------------------------


class Versions(Protocol):
    """Nodes by name and resourceVersion (``NodeHistory``; a dict in the rules' own tests)."""

    def at(self, name: str, resource_version: str) -> dict[str, Any] | None: ...


def _taints(value: Any) -> set[tuple[str, str, str]]:
    return {(str(t.get("key", "")), str(t.get("effect", "")), str(t.get("value") or ""))
            for t in value or [] if isinstance(t, Mapping)}


def _node_patch_violations(event: AuditEvent, history: Versions) -> list[str]:
    """A JSON patch must be a resourceVersion ``test`` and a write of ``/spec/taints`` that adds or removes
    only ``ebb.sh/disrupted`` on the Node of that version; a merge patch may only set ``ebb.sh/`` annotations."""
    body = event.body
    if isinstance(body, Mapping):  # a merge patch: the planner's ebb.sh/drifted
        metadata = body.get("metadata")
        annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
        if set(body) != {"metadata"} or not isinstance(metadata, Mapping) or set(metadata) != {"annotations"} \
                or not isinstance(annotations, Mapping) or not annotations \
                or not all(str(k).startswith("ebb.sh/") for k in annotations):
            return [f"{event}: a merge patch that is not only ebb.sh/ annotations: {json.dumps(body)}"]
        return []
    if not isinstance(body, list):
        return [f"{event}: a patch of an unknown form: {json.dumps(body)}"]
    guard = [op for op in body if op.get("op") == "test" and op.get("path") == "/metadata/resourceVersion"]
    labels = [op for op in body if op.get("op") == "add" and op.get("path") == "/metadata/labels"]
    writes = [op for op in body if op not in guard and op not in labels]
    if len(guard) != 1 or len(writes) != 1 or len(labels) > 1 or writes[0].get("op") not in ("add", "replace") \
            or writes[0].get("path") != "/spec/taints":
        return [f"{event}: not a guarded write of spec.taints: {json.dumps(body)}"]
    if not event.ok:
        return []  # refused (the guard failed): it changed nothing
    version = str(guard[0].get("value"))
    before = history.at(event.name, version)
    if before is None:
        return [f"{event}: Node {event.name} at resourceVersion {version} was never seen, so what the patch "
                "changed cannot be told"]
    if labels:  # with the taint, ebb's exclude-from-external-load-balancers label, and nothing else
        held = dict((before.get("metadata") or {}).get("labels") or {})
        written = dict(labels[0].get("value") or {})
        changed_keys = {k for k in held.keys() | written.keys() if held.get(k) != written.get(k)}
        if changed_keys != {EXCLUDE_LABEL} or EXCLUDED_BY not in (held.get(EXCLUDE_LABEL), written.get(EXCLUDE_LABEL)):
            return [f"{event}: changed labels other than ebb's {EXCLUDE_LABEL} of Node {event.name}: "
                    f"{sorted(changed_keys)}"]
    changed = _taints((before.get("spec") or {}).get("taints")) ^ _taints(writes[0].get("value"))
    foreign = sorted(t for t in changed if (t[0], t[1]) != EBB_TAINT)
    if foreign:
        words = ", ".join(f"{k}:{e}" for k, e, _ in foreign)
        whose = "a karpenter.sh/ taint" if any(k.startswith(KARPENTER_PREFIX) for k, _, _ in foreign) else \
            "a taint that is not ebb's own"
        return [f"{event}: changed {whose} ({words}) of Node {event.name} at resourceVersion {version}"]
    return []


def ebb_violations(events: Iterable[AuditEvent], history: Versions) -> list[str]:
    """Every request of ebb's in ``events`` that breaks the karpenter mode's rules (module docstring)."""
    out: list[str] = []
    for event in events:
        if not event.by_ebb:
            continue
        if event.resource == "nodes" and not event.subresource:
            if event.verb == "patch":
                out += _node_patch_violations(event, history)
            else:
                out.append(f"{event}: ebb may only patch Nodes next to Karpenter")
        elif event.resource == "nodeclaims" and not event.subresource:
            if event.verb == "create":
                meta = (event.body or {}).get("metadata") or {}
                if ANNOTATION_DECISION_ID not in (meta.get("annotations") or {}):
                    out.append(f"{event}: a NodeClaim without {ANNOTATION_DECISION_ID}")
                if any(str(f).startswith(KARPENTER_PREFIX) for f in meta.get("finalizers") or []):
                    out.append(f"{event}: a NodeClaim created with a karpenter.sh/ finalizer")
            elif event.verb != "delete":
                out.append(f"{event}: ebb may only create and delete NodeClaims")
    return out
