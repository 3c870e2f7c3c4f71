"""Leader election on a coordination.k8s.io/v1 Lease (kubernetes-asyncio), as client-go's leaderelection does.

A replica holds the Lease while ``holderIdentity`` is its identity and it renews ``renewTime`` at least every
``renew`` seconds; another replica takes the Lease over once ``renewTime + leaseDurationSeconds`` has passed.
Every write carries the ``resourceVersion`` it read, so two replicas racing for an expired Lease cannot both
win (the loser gets 409 Conflict). A leader that cannot renew for ``duration`` seconds steps down on its own
before anybody else may take over. On stop the leader releases the Lease (empty holder) so a follower takes
over at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import structlog

log = structlog.get_logger("ebb_consolidation_planner.leader")


class Leadership(Protocol):
    @property
    def is_leader(self) -> bool: ...

    async def run(self, stop: asyncio.Event) -> None:
        """Keep (or try to get) the leadership until ``stop`` is set."""
        ...


class AlwaysLeader:
    """A single replica (embedded mode, tests): always the leader."""

    is_leader = True

    async def run(self, stop: asyncio.Event) -> None:
        await stop.wait()


class NeverLeader:
    """A replica that never gets the leadership (tests)."""

    is_leader = False

    async def run(self, stop: asyncio.Event) -> None:
        await stop.wait()


def _micro(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _aware(moment: datetime | None) -> datetime | None:
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


class LeaseElector:
    """Leadership through a Lease ``namespace/name`` for ``identity``."""

    def __init__(self, api_client: Any, *, name: str, namespace: str, identity: str, duration: float = 15.0,
                 renew: float = 2.0) -> None:
        from kubernetes_asyncio import client

        #: dict bodies (MicroTime strings written exactly as the API server parses them)
        self._api: Any = client.CoordinationV1Api(api_client)
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.duration = duration
        self.renew = renew
        self._leader = False
        #: monotonic time of the last successful acquire/renew
        self._renewed = -float("inf")
        self.changed = asyncio.Event()

    @property
    def is_leader(self) -> bool:
        # a leader that has not renewed within the lease duration no longer counts on the Lease
        return self._leader and time.monotonic() - self._renewed < self.duration

    def _set(self, leader: bool) -> None:
        if leader != self._leader:
            self._leader = leader
            self.changed.set()
            log.info("leadership acquired" if leader else "leadership lost", lease=f"{self.namespace}/{self.name}",
                     identity=self.identity)

    def _body(self, now: datetime, *, acquire: datetime | None, transitions: int, resource_version: str | None,
              holder: str | None = None, duration: float | None = None) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if resource_version is not None:
            metadata["resourceVersion"] = resource_version
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": {
                "holderIdentity": self.identity if holder is None else holder,
                "leaseDurationSeconds": max(1, round(self.duration if duration is None else duration)),
                "acquireTime": _micro(acquire or now),
                "renewTime": _micro(now),
                "leaseTransitions": transitions,
            },
        }

    async def try_acquire(self) -> bool:
        """One attempt to acquire or renew; True when this replica holds the Lease afterwards."""
        from kubernetes_asyncio.client.exceptions import ApiException

        now = datetime.now(UTC)
        try:
            lease = await self._api.read_namespaced_lease(self.name, self.namespace)
        except ApiException as e:
            if e.status != 404:
                raise
            try:
                await self._api.create_namespaced_lease(
                    self.namespace, self._body(now, acquire=now, transitions=0, resource_version=None))
            except ApiException as e2:
                if e2.status == 409:  # another replica created it first
                    return False
                raise
            return True
        spec = lease.spec
        holder = spec.holder_identity or ""
        renewed = _aware(spec.renew_time) or _aware(spec.acquire_time)
        duration = spec.lease_duration_seconds or self.duration
        transitions = spec.lease_transitions or 0
        mine = holder == self.identity
        expired = not holder or renewed is None or renewed + timedelta(seconds=duration) <= now
        if not mine and not expired:
            return False
        acquire = _aware(spec.acquire_time) if mine else now
        body = self._body(now, acquire=acquire, transitions=transitions if mine else transitions + 1,
                          resource_version=lease.metadata.resource_version)
        try:
            await self._api.replace_namespaced_lease(self.name, self.namespace, body)
        except ApiException as e:
            if e.status == 409:  # somebody else wrote it since we read it
                return False
            raise
        return True

    async def release(self) -> None:
        """Give the Lease up (empty holder, 1 s duration) when this replica holds it."""
        from kubernetes_asyncio.client.exceptions import ApiException

        try:
            lease = await self._api.read_namespaced_lease(self.name, self.namespace)
            if lease.spec.holder_identity != self.identity:
                return
            now = datetime.now(UTC)
            await self._api.replace_namespaced_lease(self.name, self.namespace, self._body(
                now, acquire=_aware(lease.spec.acquire_time), transitions=lease.spec.lease_transitions or 0,
                resource_version=lease.metadata.resource_version, holder="", duration=1))
            log.info("lease released", lease=f"{self.namespace}/{self.name}", identity=self.identity)
        except (ApiException, OSError) as e:
            log.warning("cannot release the lease", error=repr(e))

    async def run(self, stop: asyncio.Event) -> None:
        try:
            while not stop.is_set():
                try:
                    held = await asyncio.wait_for(self.try_acquire(), timeout=max(self.renew, 1.0) * 2)
                except Exception as e:  # the API server is away: keep leading only until the lease runs out
                    log.warning("lease acquire/renew failed", error=repr(e))
                    held = self._leader and time.monotonic() - self._renewed < self.duration
                else:
                    if held:
                        self._renewed = time.monotonic()
                self._set(held)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=self.renew)
        finally:
            was = self._leader
            self._set(False)
            if was:
                await self.release()
