"""The few Kubernetes API calls a drain and a provider make on nodes and pods, behind one protocol.

``NodeApi`` reads, patches and deletes Nodes, lists, reads and deletes the pods bound to a node, and evicts a pod
through the Eviction API (``policy/v1`` ``pods/{name}/eviction``: evicted, blocked by a PodDisruptionBudget (429),
gone (404) or refused); objects are kubectl-shaped dicts (camelCase). ``KubeNodeApi`` is it on kubernetes-asyncio
(raw JSON); the embedded mode's simulated cluster and the tests' fakes are others. ``patch_until_done`` applies a
JSON patch made from the node as read, guarded by a ``test`` of its resourceVersion (``guard``), reading again
after a lost race. ``eviction_code`` words an eviction's answer as the HTTP status code a metric is labelled with.
What a drain does with these calls is ``ebb.adapters.kube.drain``'s; which pods it evicts is ``ebb.core.drain``'s.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, Protocol

from ebb.adapters.kube.paging import list_items, page_options

EvictionResult = Literal["evicted", "blocked", "gone", "refused"]


class KubeError(RuntimeError):
    """The API server answered with an unexpected status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class Conflict(KubeError):
    """A patch's ``test`` failed or the object changed meanwhile (409/422): read again and retry."""


class NodeApi(Protocol):
    """The API calls a drain and a provider make; objects are kubectl-shaped dicts (camelCase)."""

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

    async def evict(self, namespace: str, name: str, *, uid: str = "",
                    dry_run: bool = False) -> tuple[EvictionResult, str]:
        """Create a policy/v1 Eviction: evicted (2xx), blocked (429: a PDB), gone (404), refused (other);
        with the API server's message. ``uid``: the pod's, a precondition of the eviction, so that another pod
        created under the same name since is not evicted in its place (409, gone: Karpenter's eviction queue
        sends it too). ``dry_run``: only ask (``dryRun=All``): the answer the eviction would get now, and nothing
        is evicted."""
        ...

    async def delete_pod(self, namespace: str, name: str, grace_seconds: int) -> bool:
        """Delete the pod with ``gracePeriodSeconds`` (no PDB is consulted); False when it did not exist."""
        ...


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


def guard(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A ``test`` of the resourceVersion read: the patch fails (Conflict) if the node changed meanwhile."""
    version = (node.get("metadata") or {}).get("resourceVersion")
    return [] if version is None else [{"op": "test", "path": "/metadata/resourceVersion", "value": version}]


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

    async def list_nodes(self) -> list[dict[str, Any]]:
        """Every Node (not part of ``NodeApi``: the executor's finalizer loop looks for deleting ones)."""
        async def page(token: str | None) -> Mapping[str, Any]:
            return await self._page(self.core.list_node(_preload_content=False, **page_options(token)))

        return await list_items(page)

    async def list_pods(self, node: str) -> list[dict[str, Any]]:
        async def page(token: str | None) -> Mapping[str, Any]:
            return await self._page(self.core.list_pod_for_all_namespaces(
                _preload_content=False, **page_options(token, field_selector=f"spec.nodeName={node}")))

        return await list_items(page)

    async def _page(self, request: Awaitable[Any]) -> Mapping[str, Any]:
        """One page of a list: its decoded body (KubeError when the apiserver refuses it)."""
        status, body = await self._body(await request)
        if status >= 300:
            raise KubeError(status, self._message(body))
        if not isinstance(body, Mapping):
            raise KubeError(status, f"the apiserver's answer is not a list: {str(body)[:200]!r}")
        return body

    async def read_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        response = await self.core.read_namespaced_pod(name, namespace, _preload_content=False)
        status, body = await self._body(response)
        if status == 404:
            return None
        if status >= 300:
            raise KubeError(status, self._message(body))
        return dict(body)

    async def delete_pod(self, namespace: str, name: str, grace_seconds: int) -> bool:
        response = await self.core.delete_namespaced_pod(name, namespace, grace_period_seconds=grace_seconds,
                                                         _preload_content=False)
        status, body = await self._body(response)
        if status == 404:
            return False
        if status >= 300:
            raise KubeError(status, self._message(body))
        return True

    async def evict(self, namespace: str, name: str, *, uid: str = "",
                    dry_run: bool = False) -> tuple[EvictionResult, str]:
        eviction: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "Eviction",
                                    "metadata": {"name": name, "namespace": namespace}}
        if uid:
            eviction["deleteOptions"] = {"preconditions": {"uid": uid}}
        response = await self.core.create_namespaced_pod_eviction(
            name, namespace, eviction, _preload_content=False, **({"dry_run": "All"} if dry_run else {}))
        status, body = await self._body(response)
        message = self._message(body)
        if 200 <= status < 300:
            return "evicted", message
        if status == 429:
            return "blocked", message
        if status == 404 or (status == 409 and uid):  # 409: the pod of this name is another one now
            return "gone", message
        return "refused", f"HTTP {status}: {message}"
