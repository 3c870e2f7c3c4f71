"""The ebb.sh/drifted annotation on Nodes, through kubernetes-asyncio (a JSON merge patch)."""

from __future__ import annotations

from typing import Any

from ebb_drift_detector.detector import ANNOTATION_DRIFTED

MERGE_PATCH = "application/merge-patch+json"


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
