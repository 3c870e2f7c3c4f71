"""The ebb.sh/drifted annotation on Nodes, kept in line with each node's Drifted finding by the leader.

After every pass the planner hands ``DriftAnnotations.sync`` the pass's nodes and findings
(``ebb.core.findings``); it writes ``ebb.sh/drifted: <reason>`` on a drifted Node and removes it when the
drift is gone, through a ``NodeAnnotator``: ``KubeNodeAnnotator`` (kubernetes-asyncio, one JSON merge patch
per change) in a cluster, the ``SimulatedCluster`` in the embedded mode. It remembers what it last wrote per
node, so it patches only on changes; for a node it has not written yet it compares with the annotation in
the snapshot, so a stale annotation left by an earlier leader (or an older version) is removed too. A
failed patch is logged and tried again after the next pass; a Node that is gone (404) is not an error.

It never writes the NodeClaim's ``Drifted`` condition, in any mode: Karpenter's NodeClaim disruption controller
owns that condition (it would undo ebb's write), ebb reads it as an input (drift rule 4, so its own write
would come back as drift), and without Karpenter there are no NodeClaims (docs/karpenter.md, section 3).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

import structlog

from ebb.core.findings import ANNOTATION_DRIFTED, Findings, drifted_annotation
from ebb.core.model import Node

log = structlog.get_logger("ebb_consolidation_planner")

MERGE_PATCH = "application/merge-patch+json"


class NodeAnnotator(Protocol):
    async def set_drifted(self, node: str, reason: str | None) -> None:
        """Set the node's ebb.sh/drifted annotation to ``reason``, or remove it (None); a node that is
        gone is not an error."""
        ...


class KubeNodeAnnotator:
    """Sets or removes ebb.sh/drifted with a merge patch (null removes it); a Node that is gone (404) is
    not an error: nothing is left to annotate."""

    def __init__(self, api_client: Any) -> None:
        from kubernetes_asyncio import client

        self.core: Any = client.CoreV1Api(api_client)

    async def set_drifted(self, node: str, reason: str | None) -> None:
        from kubernetes_asyncio.client.exceptions import ApiException

        body = {"metadata": {"annotations": {ANNOTATION_DRIFTED: reason}}}
        try:
            await self.core.patch_node(node, body, _content_type=MERGE_PATCH)
        except ApiException as e:
            if e.status != 404:
                raise


class DriftAnnotations:
    """What the leader last wrote as ebb.sh/drifted per node, and the writes that bring it in line."""

    def __init__(self, annotator: NodeAnnotator) -> None:
        self.annotator = annotator
        #: the ebb.sh/drifted value last written per node (None: removed)
        self._written: dict[str, str | None] = {}
        #: patches made (set or removed) and patches that failed, since the start
        self.patched = 0
        self.failed = 0

    async def sync(self, nodes: Iterable[Node], found: Findings) -> int:
        """Bring ebb.sh/drifted on every node of the pass in line with its Drifted finding; the number of
        nodes patched."""
        present: set[str] = set()
        patched = 0
        for node in nodes:
            present.add(node.name)
            want = drifted_annotation(found.get(node.name, []))
            have = self._written.get(node.name, node.annotations.get(ANNOTATION_DRIFTED))
            if want == have:
                continue
            try:
                await self.annotator.set_drifted(node.name, want)
            except Exception as e:
                self.failed += 1
                log.warning("cannot annotate the node; retrying after the next pass", node=node.name, error=repr(e))
                continue
            self._written[node.name] = want
            patched += 1
            log.info("node annotated" if want else "node annotation removed", node=node.name,
                     annotation=ANNOTATION_DRIFTED)
        for gone in set(self._written) - present:
            del self._written[gone]
        self.patched += patched
        return patched
