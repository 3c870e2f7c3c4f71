"""Draining a node through the Eviction API, as the termination-executor does it (termination in
docs/architecture.md#decision-semantics).

``Drainer.taint`` adds the drainer's disruption taint (the provider's, ``ebb.adapters.provider``:
``karpenter.sh/disrupted:NoSchedule`` where ebb deletes Nodes itself, ``ebb.sh/disrupted:NoSchedule`` next to a
real Karpenter) with an idempotent JSON patch (nothing when the taint is there; a ``test`` of the
resourceVersion read guards against a concurrent writer, and a lost race is read again and retried);
``patch_until_done`` is that loop for any node patch.
``Drainer.drain`` evicts the node's pods with ``policy/v1`` Evictions (``pods/{name}/eviction``) in
groups, each group gone before the next one starts:

1. non-critical pods, 2. critical pods (priority ≥ 2000000000 or a ``system-*-critical`` priority class),
3. non-critical DaemonSet pods, 4. critical DaemonSet pods.

Mirror/static pods, finished pods and pods that tolerate the disruption taint are left alone. HTTP 429
(a PodDisruptionBudget forbids the eviction now) and other refusals are retried with capped exponential
backoff (``EvictionBackoff``, an ``ebb.adapters.backoff.Backoff``; every wait on the drainer's clock, cut
short by its ``stop`` with ``Stopped``); 404 means the pod is already gone. A pod is gone when the API
server no longer has it (or has a new pod of the same name: a new UID or another node); with
``terminating_is_gone`` a pod whose deletion has started counts as gone too. A pod that is not gone
``eviction_deadline`` seconds after its first eviction attempt (by the drainer's clock) fails the drain
(``DrainFailed``): nothing is ever force-deleted.
``Drainer.untaint`` removes the taint again (rollback). Removing the node afterwards is the provider's
(``retire``). The drainer itself names no taint and touches no finalizer.

The API is behind the small ``NodeApi`` protocol: ``KubeNodeApi`` on kubernetes-asyncio, fakes in tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol

from tenacity import RetryCallState, retry_if_exception_type

from ebb.adapters.backoff import Backoff
from ebb.adapters.clock import Clock, Waitable

log = logging.getLogger("ebb.kube.drain")

MIRROR_ANNOTATION: Final = "kubernetes.io/config.mirror"
CRITICAL_PRIORITY: Final = 2_000_000_000

EvictionResult = Literal["evicted", "blocked", "gone", "refused"]


class KubeError(RuntimeError):
    """The API server answered with an unexpected status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class Conflict(KubeError):
    """A patch's ``test`` failed or the object changed meanwhile (409/422): read again and retry."""


class DrainFailed(RuntimeError):
    """The node could not be drained (a pod that would not go within the deadline)."""


class NodeApi(Protocol):
    """The few API calls a drain needs; objects are kubectl-shaped dicts (camelCase)."""

    async def read_node(self, name: str) -> dict[str, Any] | None:
        """The Node, or None when it does not exist."""
        ...

    async def patch_node(self, name: str, patch: list[dict[str, Any]]) -> None:
        """Apply a JSON patch (RFC 6902); Conflict when a ``test`` fails, KubeError(404) when missing."""
        ...

    async def delete_node(self, name: str) -> bool:
        """Delete the Node; False when it did not exist."""
        ...

    async def list_pods(self, node: str) -> list[dict[str, Any]]:
        """The pods bound to ``node`` (all namespaces)."""
        ...

    async def read_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        ...

    async def evict(self, namespace: str, name: str) -> tuple[EvictionResult, str]:
        """Create a policy/v1 Eviction: evicted (2xx), blocked (429: a PDB), gone (404), refused (other);
        with the API server's message."""
        ...


@dataclass(frozen=True)
class EvictionBackoff(Backoff):
    """Capped exponential backoff between eviction attempts of one pod: 0.5 s doubling to 10 s, no jitter,
    until the eviction deadline."""

    initial: float = 0.5
    maximum: float = 10.0
    jitter: float = 0.0


class _Refused(Exception):
    """An eviction was refused (429 or another refusal): tried again after the backoff."""

    def __init__(self, result: EvictionResult, message: str) -> None:
        super().__init__(f"{result}: {message}")
        self.result = result
        self.message = message


def eviction_code(result: EvictionResult, message: str) -> str:
    """The HTTP status code of an eviction request, as a metric label: 200, 429, 404, or the code of a
    refusal (``KubeNodeApi`` words it "HTTP nnn: ..."); "error" when it is not known."""
    if result == "evicted":
        return "200"
    if result == "blocked":
        return "429"
    if result == "gone":
        return "404"
    head = message.split(":", 1)[0]
    if head.startswith("HTTP ") and head[5:].isdigit():
        return head[5:]
    return "error"


# -- pod classification (pure) --------------------------------------------------------------------------------


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    value = obj.get("metadata")
    return value if isinstance(value, Mapping) else {}


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    value = obj.get("spec")
    return value if isinstance(value, Mapping) else {}


def pod_ref(pod: Mapping[str, Any]) -> str:
    meta = _meta(pod)
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def is_mirror_or_static(pod: Mapping[str, Any]) -> bool:
    meta = _meta(pod)
    if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
        return True
    return any(ref.get("kind") == "Node" for ref in meta.get("ownerReferences") or [])


def is_daemonset_pod(pod: Mapping[str, Any]) -> bool:
    return any(ref.get("kind") == "DaemonSet" for ref in _meta(pod).get("ownerReferences") or [])


def is_critical(pod: Mapping[str, Any]) -> bool:
    spec = _spec(pod)
    priority = spec.get("priority")
    if isinstance(priority, int) and priority >= CRITICAL_PRIORITY:
        return True
    name = spec.get("priorityClassName") or ""
    return isinstance(name, str) and name.startswith("system-") and name.endswith("-critical")


def is_finished(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status")
    return isinstance(status, Mapping) and status.get("phase") in ("Succeeded", "Failed")


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, str]) -> bool:
    """Kubernetes' toleration matching (an empty key with Exists tolerates every taint)."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if not key:
        return operator == "Exists"
    if key != taint.get("key"):
        return False
    if operator == "Exists":
        return True
    return bool((toleration.get("value") or "") == (taint.get("value") or ""))


def tolerates_disruption(pod: Mapping[str, Any], taint: Mapping[str, str]) -> bool:
    return any(tolerates(t, taint) for t in _spec(pod).get("tolerations") or [])


def skip_reason(pod: Mapping[str, Any], taint: Mapping[str, str]) -> str | None:
    """Why a pod is left alone by a drain under the disruption ``taint``, or None when it must be evicted
    (a pod that tolerates the taint would be scheduled right back)."""
    if is_mirror_or_static(pod):
        return "mirror/static pod"
    if is_finished(pod):
        return "finished"
    if tolerates_disruption(pod, taint):
        return f"tolerates {taint['key']}"
    return None


def eviction_groups(pods: Sequence[Mapping[str, Any]], taint: Mapping[str, str]) -> list[list[Mapping[str, Any]]]:
    """The pods to evict, in the order they go (empty groups dropped): non-critical, critical,
    non-critical DaemonSet pods, critical DaemonSet pods."""
    groups: list[list[Mapping[str, Any]]] = [[], [], [], []]
    for pod in pods:
        if skip_reason(pod, taint) is None:
            groups[2 * is_daemonset_pod(pod) + is_critical(pod)].append(pod)
    return [g for g in groups if g]


# -- taints (JSON patches, pure) ----------------------------------------------------------------------------


def _same_taint(taint: Mapping[str, Any], wanted: Mapping[str, str]) -> bool:
    return taint.get("key") == wanted["key"] and taint.get("effect") == wanted["effect"]


def guard(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A ``test`` of the resourceVersion read: the patch fails (Conflict) if the node changed meanwhile."""
    version = _meta(node).get("resourceVersion")
    return [] if version is None else [{"op": "test", "path": "/metadata/resourceVersion", "value": version}]


def taint_patch(node: Mapping[str, Any], taint: Mapping[str, str]) -> list[dict[str, Any]] | None:
    """The JSON patch that adds ``taint``, or None when the node has it already."""
    taints = list(_spec(node).get("taints") or [])
    if any(_same_taint(t, taint) for t in taints):
        return None
    return [*guard(node), {"op": "add", "path": "/spec/taints", "value": [*taints, dict(taint)]}]


def untaint_patch(node: Mapping[str, Any], taint: Mapping[str, str]) -> list[dict[str, Any]] | None:
    """The JSON patch that removes ``taint`` (every copy of it), or None when there is none."""
    taints = list(_spec(node).get("taints") or [])
    kept = [t for t in taints if not _same_taint(t, taint)]
    if len(kept) == len(taints):
        return None
    return [*guard(node), {"op": "add", "path": "/spec/taints", "value": kept}]


async def patch_until_done(api: NodeApi, name: str,
                           make: Callable[[Mapping[str, Any]], list[dict[str, Any]] | None]) -> bool | None:
    """Read the node and apply ``make``'s patch until it applies cleanly (a lost race is read again); True
    when patched, False when there was nothing to do, None when the node does not exist."""
    for _ in range(10):
        node = await api.read_node(name)
        if node is None:
            return None
        patch = make(node)
        if patch is None:
            return False
        try:
            await api.patch_node(name, patch)
        except Conflict:
            continue
        except KubeError as e:
            if e.status == 404:
                return None
            raise
        return True
    raise KubeError(409, f"node {name} kept changing while being patched")


# -- the drainer ----------------------------------------------------------------------------------------------


@dataclass
class DrainReport:
    """What a drain did on one node."""

    node: str
    evicted: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    #: 429s (and other refusals) answered while evicting
    blocked: int = 0


class Drainer:
    """Taint, drain and untaint nodes through a ``NodeApi``, under one disruption taint."""

    def __init__(
        self,
        api: NodeApi,
        *,
        disruption_taint: Mapping[str, str],
        eviction_deadline: float = 600.0,
        backoff: EvictionBackoff | None = None,
        poll_interval: float = 0.5,
        terminating_is_gone: bool = False,
        clock: Clock | None = None,
        stop: Waitable | None = None,
        on_eviction: Callable[[str], None] | None = None,
    ) -> None:
        self.api = api
        #: the taint (``key``, ``effect``) put on a node being disrupted: the provider's
        self.disruption_taint: Mapping[str, str] = dict(disruption_taint)
        #: called with the HTTP status code of every eviction request ("200", "429", "404", ...; "error"
        #: when the API gave none): the executor's ebb_pods_eviction_requests_total{code}
        self.on_eviction = on_eviction
        self.eviction_deadline = eviction_deadline
        self.backoff = backoff or EvictionBackoff()
        self.poll_interval = poll_interval
        self.terminating_is_gone = terminating_is_gone
        #: measures the deadline and the waits
        self.clock = clock or Clock()
        self.stop = stop
        #: a wait on the clock that raises ``Stopped`` once ``stop`` is set (also the executor's readiness poll)
        self.sleep = self.clock.sleeper(stop)

    @property
    def taint_words(self) -> str:
        """The taint as ``key:effect`` (the Tainted and RolledBack events say it)."""
        return f"{self.disruption_taint['key']}:{self.disruption_taint['effect']}"

    async def taint(self, node: str) -> bool | None:
        """Add the disruption taint; True when added, False when present, None when the node is gone."""
        return await patch_until_done(self.api, node, lambda obj: taint_patch(obj, self.disruption_taint))

    async def untaint(self, node: str) -> bool | None:
        """Remove the disruption taint (rollback); True when removed, False when absent, None when gone."""
        return await patch_until_done(self.api, node, lambda obj: untaint_patch(obj, self.disruption_taint))

    async def drain(self, node: str, *, on_evicted: Callable[[Mapping[str, Any]], None] | None = None) -> DrainReport:
        """Evict the node's pods group by group; DrainFailed when a pod does not go in time. ``on_evicted`` is
        called with each pod the Eviction API evicted (200; not the pods already gone or terminating): the
        executor's ``Evicted`` event and ``ebb_pods_drained_total``."""
        report = DrainReport(node)
        pods = await self.api.list_pods(node)
        for pod in pods:
            reason = skip_reason(pod, self.disruption_taint)
            if reason is not None:
                report.skipped[pod_ref(pod)] = reason
        for group in eviction_groups(pods, self.disruption_taint):
            await asyncio.gather(*(self._evict_until_gone(node, pod, report, on_evicted) for pod in group))
        return report

    async def _gone(self, node: str, pod: Mapping[str, Any]) -> bool:
        meta = _meta(pod)
        current = await self.api.read_pod(str(meta.get("namespace", "")), str(meta.get("name", "")))
        if current is None:
            return True
        current_meta = _meta(current)
        if current_meta.get("uid") != meta.get("uid") or _spec(current).get("nodeName") not in (None, node):
            return True  # a new pod of the same name
        return self.terminating_is_gone and current_meta.get("deletionTimestamp") is not None

    async def _evict_until_gone(self, node: str, pod: Mapping[str, Any], report: DrainReport,
                                on_evicted: Callable[[Mapping[str, Any]], None] | None = None) -> None:
        meta = _meta(pod)
        namespace, name, ref = str(meta.get("namespace", "")), str(meta.get("name", "")), pod_ref(pod)
        deadline = self.clock.monotonic() + self.eviction_deadline
        if meta.get("deletionTimestamp") is None:

            def refused(attempt: RetryCallState) -> None:
                error = attempt.outcome.exception() if attempt.outcome else None
                log.info("eviction of %s %s (attempt %d), retrying in %.2fs", ref, error, attempt.attempt_number,
                         attempt.upcoming_sleep)

            tried = 0
            try:
                async for attempt in self.backoff.retrying(self.clock, self.stop, deadline=deadline,
                                                           retry=retry_if_exception_type(_Refused),
                                                           before_sleep=refused):
                    tried = attempt.retry_state.attempt_number
                    with attempt:
                        result, message = await self.api.evict(namespace, name)
                        if self.on_eviction is not None:
                            self.on_eviction(eviction_code(result, message))
                        if result not in ("evicted", "gone"):
                            report.blocked += 1
                            raise _Refused(result, message)
                        if result == "evicted" and on_evicted is not None:
                            on_evicted(pod)
            except _Refused as last:
                raise DrainFailed(
                    f"pod {ref} on node {node} could not be evicted within {self.eviction_deadline:g}s "
                    f"({tried} attempts; last: {last})"
                ) from None
        report.evicted.append(ref)
        while not await self._gone(node, pod):
            if self.clock.monotonic() + self.poll_interval > deadline:
                raise DrainFailed(
                    f"pod {ref} on node {node} was evicted but still there after {self.eviction_deadline:g}s"
                )
            await self.sleep(self.poll_interval)


# -- kubernetes-asyncio ------------------------------------------------------------------------------------------


class KubeNodeApi:
    """``NodeApi`` on a kubernetes-asyncio ``ApiClient`` (raw JSON, so objects stay kubectl-shaped)."""

    def __init__(self, api_client: Any) -> None:
        from kubernetes_asyncio import client

        self._client = client
        self.core: Any = client.CoreV1Api(api_client)

    @staticmethod
    async def _body(response: Any) -> tuple[int, Any]:
        try:
            raw = await response.read()
        finally:
            with contextlib.suppress(Exception):
                response.release()
        try:
            return int(response.status), json.loads(raw) if raw else None
        except ValueError:
            return int(response.status), raw.decode("utf-8", "replace")

    @staticmethod
    def _message(body: Any) -> str:
        if isinstance(body, dict):
            return str(body.get("message") or body.get("reason") or body)
        return str(body)

    async def read_node(self, name: str) -> dict[str, Any] | None:
        status, body = await self._body(await self.core.read_node(name, _preload_content=False))
        if status == 404:
            return None
        if status >= 300:
            raise KubeError(status, self._message(body))
        return dict(body)

    async def patch_node(self, name: str, patch: list[dict[str, Any]]) -> None:
        response = await self.core.patch_node(
            name, patch, _content_type="application/json-patch+json", _preload_content=False
        )
        status, body = await self._body(response)
        if status in (409, 422):
            raise Conflict(status, self._message(body))
        if status >= 300:
            raise KubeError(status, self._message(body))

    async def delete_node(self, name: str) -> bool:
        status, body = await self._body(await self.core.delete_node(name, _preload_content=False))
        if status == 404:
            return False
        if status >= 300:
            raise KubeError(status, self._message(body))
        return True

    async def list_pods(self, node: str) -> list[dict[str, Any]]:
        pods: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            options: dict[str, Any] = {"field_selector": f"spec.nodeName={node}", "limit": 500}
            if token:
                options["_continue"] = token
            status, body = await self._body(
                await self.core.list_pod_for_all_namespaces(_preload_content=False, **options)
            )
            if status >= 300:
                raise KubeError(status, self._message(body))
            pods.extend(body.get("items") or [])
            token = (body.get("metadata") or {}).get("continue")
            if not token:
                return pods

    async def read_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        response = await self.core.read_namespaced_pod(name, namespace, _preload_content=False)
        status, body = await self._body(response)
        if status == 404:
            return None
        if status >= 300:
            raise KubeError(status, self._message(body))
        return dict(body)

    async def evict(self, namespace: str, name: str) -> tuple[EvictionResult, str]:
        eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
        response = await self.core.create_namespaced_pod_eviction(name, namespace, eviction, _preload_content=False)
        status, body = await self._body(response)
        message = self._message(body)
        if 200 <= status < 300:
            return "evicted", message
        if status == 429:
            return "blocked", message
        if status == 404:
            return "gone", message
        return "refused", f"HTTP {status}: {message}"
