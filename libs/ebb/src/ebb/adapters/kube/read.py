"""Reading a live cluster's objects once, for ``ebb plan --live``.

Every kind a dump for ``ebb plan`` holds (`ebb.adapters.kube.kinds.PLAN_KINDS`: what the services read, and ebb's
Hold documents) is listed page by page through kubernetes-asyncio, as
raw JSON (a list of thousands of pods decoded into the client's models would take longer than the plan), and
trimmed as the cluster-watcher trims what it publishes, so the plan reads what the planner would. A custom kind
the cluster does not serve (its CRD is not installed: no Karpenter, or none of ebb's CRDs) is left out and
named; any other failure (no kubeconfig, no answer, no permission) is a `ClusterReadError` that says which
kind and what the apiserver or the client said.

`read_cluster_from` also looks for Karpenter's Deployment (`read_karpenter`: the Deployments labelled
``app.kubernetes.io/name=karpenter``, in any namespace), whose interruption queue the conflict check reads
(docs/karpenter.md#the-conflict-check). It is a best effort: a user who may not list Deployments, or a Karpenter
installed without the chart's label, gets a plan without that check, and the summary says so.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ebb.adapters.kube.client import kube_client
from ebb.adapters.kube.kinds import PLAN_KINDS, KindSpec
from ebb.adapters.kube.paging import PAGE_SIZE, page_options, pages
from ebb.adapters.kube.trim import trim
from ebb.adapters.kube.watch import decode_json, status_message

#: (connect, read) seconds of one list request
LIST_TIMEOUT = (10.0, 120.0)


class ClusterReadError(Exception):
    """The cluster could not be read; the message says which kind and why."""


@dataclass
class ClusterRead:
    """What one read of a cluster found: the trimmed documents, how many of each kind, the custom kinds the
    cluster does not serve, and the apiserver's address."""

    server: str
    documents: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    not_served: list[str] = field(default_factory=list)
    #: why Karpenter's Deployment could not be looked for ("": it was, found or not)
    karpenter_unread: str = ""

    def summary(self) -> str:
        """One line for stderr: ``read https://...: 3 Node, 12 Pod, ...; not served: NodeClaim (no CRD)``."""
        counts = ", ".join(f"{n:,} {kind}" for kind, n in self.counts.items())
        missing = f"; not served (no CRD): {', '.join(self.not_served)}" if self.not_served else ""
        unread = f"; Karpenter's Deployment not read ({self.karpenter_unread})" if self.karpenter_unread else ""
        return f"read {self.server}: {counts}{missing}{unread}"


async def read_cluster(api: Any, kinds: Iterable[KindSpec] = PLAN_KINDS, *, page_size: int = PAGE_SIZE,
                       progress: Callable[[str, int], None] | None = None) -> ClusterRead:
    """Every object of ``kinds`` on the cluster of ``api`` (a kubernetes-asyncio ApiClient), trimmed; ``progress``
    is told (kind, objects of it so far) after each page."""
    read = ClusterRead(server=str(api.configuration.host))
    for spec in kinds:
        items = await _list(api, spec, page_size, progress)
        if items is None:
            read.not_served.append(spec.kind)
            continue
        read.counts[spec.kind] = len(items)
        read.documents.extend(trim(item, kind=spec.kind, api_version=spec.api_version, copy=False)
                              for item in items)
    return read


async def read_cluster_from(kubeconfig: str = "", context: str = "", *,
                            progress: Callable[[str, int], None] | None = None) -> ClusterRead:
    """`read_cluster` on the cluster of ``kubeconfig`` (default: $KUBECONFIG or ~/.kube/config, or in-cluster in a
    pod) and ``context`` (default: its current one)."""
    from kubernetes_asyncio.config import ConfigException

    if kubeconfig and not await asyncio.to_thread(Path(kubeconfig).is_file):
        raise ClusterReadError(f"cannot use {kubeconfig}: no such file")
    try:
        async with kube_client(kubeconfig, context, component="ebb-plan") as api:
            read = await read_cluster(api, progress=progress)
            await read_karpenter(api, read)
            return read
    except (ConfigException, OSError) as exc:  # no kubeconfig, no such context, a file it names is missing
        where = kubeconfig or "the default kubeconfig ($KUBECONFIG or ~/.kube/config)"
        raise ClusterReadError(f"cannot use {where}: {exc}") from exc


async def _list(api: Any, spec: KindSpec, page_size: int,
                progress: Callable[[str, int], None] | None) -> list[dict[str, Any]] | None:
    """The objects of one kind, page by page; None when the cluster does not serve that custom kind."""
    import aiohttp

    call = spec.list_function(api)

    async def fetch(token: str | None) -> Mapping[str, Any]:
        try:
            response = await call(_preload_content=False, **page_options(token, limit=page_size,
                                                                         _request_timeout=LIST_TIMEOUT))
            try:
                body = await response.read()
            finally:
                response.release()
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise ClusterReadError(f"cannot list {spec.plural} at {api.configuration.host}: "
                                   f"{exc or type(exc).__name__}") from exc
        if response.status == 404 and spec.custom:
            raise _NotServed
        if not 200 <= response.status <= 299:
            raise ClusterReadError(f"cannot list {spec.plural}: the apiserver answered {response.status}: "
                                   f"{status_message(body.decode('utf-8', 'replace'))}")
        return _decode(body)

    items: list[dict[str, Any]] = []
    try:
        async for page in pages(fetch):
            items.extend(page.get("items") or [])
            if progress is not None:
                progress(spec.kind, len(items))
    except _NotServed:
        return None
    return items


#: the label Karpenter's chart puts on its Deployment
KARPENTER_SELECTOR = "app.kubernetes.io/name=karpenter"


async def read_karpenter(api: Any, read: ClusterRead) -> None:
    """Add Karpenter's Deployments (``KARPENTER_SELECTOR``, every namespace) to ``read``, or say in
    ``read.karpenter_unread`` why they could not be listed (no permission, no answer): never an error."""
    import aiohttp
    from kubernetes_asyncio import client

    apps: Any = client.AppsV1Api(api)  # with _preload_content=False: the raw response, not the model
    try:
        response = await apps.list_deployment_for_all_namespaces(
            label_selector=KARPENTER_SELECTOR, _preload_content=False, _request_timeout=LIST_TIMEOUT)
        try:
            body = await response.read()
        finally:
            response.release()
    except (TimeoutError, aiohttp.ClientError) as exc:
        read.karpenter_unread = f"{exc or type(exc).__name__}"
        return
    if not 200 <= response.status <= 299:
        read.karpenter_unread = f"the apiserver answered {response.status}"
        return
    try:
        items = _decode(body).get("items") or []
    except ClusterReadError as exc:
        read.karpenter_unread = str(exc)
        return
    read.documents.extend(trim(item, kind="Deployment", api_version="apps/v1", copy=False) for item in items)
    if items:
        read.counts["Deployment"] = len(items)


class _NotServed(Exception):
    """A custom kind's list answered 404: the cluster does not serve it (no CRD)."""


def _decode(body: bytes) -> dict[str, Any]:
    try:
        page = decode_json(body)
    except ValueError as exc:
        raise ClusterReadError(f"the apiserver's answer is not JSON: {body[:200]!r}") from exc
    if not isinstance(page, dict):
        raise ClusterReadError(f"the apiserver's answer is not a list: {body[:200]!r}")
    return page


__all__ = ["ClusterRead", "ClusterReadError", "read_cluster", "read_cluster_from", "read_karpenter"]
