"""The ``ConflictFree`` condition on every DisruptionPolicy's status, kept in line with the conflict check.

After every computed pass the planner hands ``PolicyConditions.sync`` the pass's DisruptionPolicies and conflicts
(``ebb.core.conflicts``); it writes each policy's condition (``policy_condition``: False with the conflicts of its
NodePool, True without) through a ``PolicyStatusWriter``: ``KubePolicyStatus`` (kubernetes-asyncio, one JSON merge
patch of the ``status`` subresource per change) in a cluster. It remembers what it last wrote per policy, so it
patches only on changes (a new leader writes each once); ``lastTransitionTime`` is the moment the status changed.
A failed patch is logged and tried again after the next pass; a DisruptionPolicy that is gone (404) is not an error.
``kubectl get disruptionpolicies`` shows the condition's status in its ``ConflictFree`` column.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, Protocol

import structlog

from ebb.core.conflicts import CONDITION_CONFLICT_FREE, Condition, Conflict, policy_condition
from ebb.core.model import DisruptionPolicy
from ebb.core.quantity import fmt_time

log = structlog.get_logger("ebb_consolidation_planner")

MERGE_PATCH = "application/merge-patch+json"
GROUP, VERSION, PLURAL = "ebb.sh", "v1", "disruptionpolicies"


class PolicyStatusWriter(Protocol):
    async def set_condition(self, policy: str, condition: dict[str, str]) -> None:
        """Make ``condition`` (a Kubernetes condition: type, status, reason, message, lastTransitionTime) the
        DisruptionPolicy's; a policy that is gone is not an error."""
        ...


class KubePolicyStatus:
    """Writes ``status.conditions`` of a DisruptionPolicy with a merge patch of its status subresource (the only
    condition ebb keeps there, so the list is replaced whole); a policy that is gone (404) is not an error."""

    def __init__(self, api_client: Any) -> None:
        from kubernetes_asyncio import client

        self.custom: Any = client.CustomObjectsApi(api_client)

    async def set_condition(self, policy: str, condition: dict[str, str]) -> None:
        from kubernetes_asyncio.client.exceptions import ApiException

        body = {"status": {"conditions": [condition]}}
        try:
            await self.custom.patch_cluster_custom_object_status(GROUP, VERSION, PLURAL, policy, body,
                                                                 _content_type=MERGE_PATCH)
        except ApiException as e:
            if e.status != 404:
                raise


class PolicyConditions:
    """What the leader last wrote as each DisruptionPolicy's ``ConflictFree`` condition, and the writes that bring it
    in line."""

    def __init__(self, writer: PolicyStatusWriter) -> None:
        self.writer = writer
        #: the condition last written per policy, with its transition time
        self._written: dict[str, tuple[Condition, str]] = {}
        #: patches made and patches that failed, since the start
        self.patched = 0
        self.failed = 0

    async def sync(self, policies: Iterable[DisruptionPolicy], found: tuple[Conflict, ...], now: datetime) -> int:
        """Write the condition of every policy whose condition changed; the number of policies patched."""
        present: set[str] = set()
        patched = 0
        for policy in policies:
            present.add(policy.name)
            want = policy_condition(policy.name, found)
            held = self._written.get(policy.name)
            if held is not None and held[0] == want:
                continue
            since = held[1] if held is not None and held[0].status == want.status else fmt_time(now)
            condition = {"type": CONDITION_CONFLICT_FREE, "status": want.status, "reason": want.reason,
                         "message": want.message, "lastTransitionTime": since}
            try:
                await self.writer.set_condition(policy.name, condition)
            except Exception as e:
                self.failed += 1
                log.warning("cannot write the DisruptionPolicy's condition; retrying after the next pass",
                            policy=policy.name, error=repr(e))
                continue
            self._written[policy.name] = (want, since)
            patched += 1
            log.info("DisruptionPolicy condition written", policy=policy.name, condition=CONDITION_CONFLICT_FREE,
                     status=want.status, reason=want.reason)
        for gone in set(self._written) - present:
            del self._written[gone]
        self.patched += patched
        return patched
