"""Which planner replica leads: a coordination.k8s.io/v1 Lease, through kubernetes-asyncio's ``leaderelection``.

``LeaseElector`` runs the library's ``LeaderElection`` on its ``LeaseLock`` (client-go's algorithm): a
replica holds the Lease while ``holderIdentity`` is its identity and it renews it every ``renew`` seconds; a
follower retries every ``renew`` seconds and takes the Lease over once it has seen no change to it for
``duration`` seconds (by its own clock, so the replicas' clocks need not agree); every write carries the
``resourceVersion`` it read, so two replicas racing for it cannot both win. A leader that cannot renew for
the renew deadline (two thirds of ``duration``, client-go's 10 s of 15 s) steps down, before anybody else
may take over; the planner reads ``is_leader``.

What the library lacks, and this module adds around it:

- **a graceful stop**: ``LeaderElection.run`` never returns while it leads and cannot release the Lease
  (client-go's ``ReleaseOnCancel``): ``run(stop)`` cancels it on ``stop`` and gives the Lease up (empty
  holder, 1 s duration), so a follower takes over at its next retry instead of after ``duration``;
- **candidacy again after a loss**: the library's ``run`` returns once the leadership is lost; this
  replica then competes again;
- **failures as failed attempts**: the library catches only ``ApiException`` (and expects a JSON body); a
  connection error or a hanging call would end or stall the election. ``_Lease`` bounds every call by
  ``renew`` seconds and turns any failure into a failed attempt, so a leader keeps leading through an
  API-server blip until its renew deadline, and a follower keeps trying;
- **timestamps and transitions**: the library writes naive local time with a ``Z`` (wrong on a host not
  in UTC) and never counts ``leaseTransitions``; ``_Lease`` writes the clock's UTC time (as MicroTime) and
  counts a transition whenever the holder changes;
- **leadership by the clock**: ``is_leader`` is also False once the last successful write started
  ``duration`` seconds ago (``ebb.adapters.clock``), whatever the library's loop believes.

The library's own waits (``asyncio.sleep``) run on the event loop; it measures the renew deadline with
``time.time``. Its configuration wants ``renew`` (its retry period) of at least 1 s.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import structlog
from kubernetes_asyncio.client import ApiClient, CoordinationV1Api, V1LeaseSpec
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.leaderelection.electionconfig import Config
from kubernetes_asyncio.leaderelection.leaderelection import LeaderElection
from kubernetes_asyncio.leaderelection.leaderelectionrecord import LeaderElectionRecord
from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

from ebb.adapters.clock import Clock, Stopped, unless_stopped

log = structlog.get_logger("ebb_consolidation_planner.leader")

#: the renew deadline as a share of the lease duration (client-go's defaults: 10 s of 15 s)
RENEW_DEADLINE_SHARE = 2 / 3


def _micro(moment: datetime) -> str:
    """A MicroTime as the API server writes it."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _micro_time(moment: datetime | str | None, default: datetime) -> str:
    """``moment`` as a MicroTime string: a ``datetime`` read back would be written with ``isoformat``, which
    drops the fraction when it is 0 (and the API server then rejects it)."""
    if isinstance(moment, str):
        return moment
    return _micro(moment or default)


def _failed(error: BaseException) -> ApiException:
    """A failure the library's ``get`` handles: an ``ApiException`` with a JSON status body."""
    failure = ApiException(status=503, reason=repr(error))
    failure.body = json.dumps({"code": 503, "message": repr(error)}).encode()
    return failure


def _has_status(error: ApiException) -> bool:
    """The library reads ``json.loads(error.body)["code"]``."""
    try:
        return "code" in json.loads(error.body or "")
    except (ValueError, TypeError):
        return False


class _Lease(LeaseLock):
    """The library's ``LeaseLock``, every call bounded by ``call_timeout`` and never raising, with UTC times
    and counted transitions; ``renewed`` is the clock's time when the last successful write started."""

    def __init__(self, api_client: ApiClient, *, name: str, namespace: str, identity: str, clock: Clock,
                 call_timeout: float) -> None:
        super().__init__(name, namespace, identity, api_client)
        self.clock = clock
        self.call_timeout = call_timeout
        self.renewed = -float("inf")

    async def get(self, name: str, namespace: str) -> (
            tuple[bool, LeaderElectionRecord] | tuple[bool, Exception] | tuple[bool, None]):
        try:
            async with asyncio.timeout(self.call_timeout):
                result = await super().get(name, namespace)
        except Exception as e:  # the API server is away or slow: a failed attempt
            log.warning("reading the lease failed", lease=f"{namespace}/{name}", error=repr(e))
            return False, _failed(e)
        if isinstance(result[1], ApiException) and not _has_status(result[1]):
            return False, _failed(result[1])
        return result

    async def create(self, name: str, namespace: str, election_record: LeaderElectionRecord) -> bool:
        return await self._write(super().create(name, namespace, election_record))

    async def update(self, name: str, namespace: str, updated_record: LeaderElectionRecord) -> bool:
        return await self._write(super().update(name, namespace, updated_record))

    async def _write(self, call: Any) -> bool:
        started = self.clock.monotonic()
        try:
            async with asyncio.timeout(self.call_timeout):
                written = bool(await call)
        except Exception as e:
            log.warning("writing the lease failed", lease=f"{self.namespace}/{self.name}", error=repr(e))
            return False
        if written:
            self.renewed = started
        return written

    def update_lease(self, leader_election_record: LeaderElectionRecord,
                     current_spec: V1LeaseSpec | None = None) -> V1LeaseSpec:
        previous = current_spec.holder_identity if current_spec is not None else None
        spec: V1LeaseSpec = super().update_lease(leader_election_record, current_spec)
        moment = self.clock.now()
        now = _micro(moment)
        # MicroTime strings, as the library writes them
        spec.renew_time = now  # type: ignore[assignment]
        if current_spec is None:
            spec.acquire_time = now  # type: ignore[assignment]
            spec.lease_transitions = 0
        elif previous != leader_election_record.holder_identity:
            spec.acquire_time = now  # type: ignore[assignment]
            spec.lease_transitions = (spec.lease_transitions or 0) + 1
        else:
            spec.acquire_time = _micro_time(spec.acquire_time, moment)  # type: ignore[assignment]
        return spec


class LeaseElector:
    """Leadership through the Lease ``namespace/name`` for ``identity`` (see the module docstring)."""

    #: the leadership comes and goes with the Lease
    fixed = False

    def __init__(self, api_client: ApiClient, *, name: str, namespace: str, identity: str, duration: float = 15.0,
                 renew: float = 2.0, clock: Clock | None = None) -> None:
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.duration = duration
        self.renew = renew
        self.clock = clock or Clock()
        self._api = CoordinationV1Api(api_client)
        self._lease = _Lease(api_client, name=name, namespace=namespace, identity=identity, clock=self.clock,
                             call_timeout=renew)
        lease_seconds = max(1, round(duration))
        self._config = Config(self._lease, lease_duration=lease_seconds,
                              renew_deadline=lease_seconds * RENEW_DEADLINE_SHARE, retry_period=renew,
                              onstarted_leading=self._started, onstopped_leading=self._stopped)
        self._leader = False
        self.changed = asyncio.Event()

    @property
    def is_leader(self) -> bool:
        # a leader that has not renewed within the lease duration no longer counts on the Lease
        return self._leader and self.clock.monotonic() - self._lease.renewed < self.duration

    def _set(self, leader: bool) -> None:
        if leader != self._leader:
            self._leader = leader
            self.changed.set()
            log.info("leadership acquired" if leader else "leadership lost", lease=f"{self.namespace}/{self.name}",
                     identity=self.identity)

    async def _started(self) -> None:
        self._set(True)

    async def _stopped(self) -> None:
        self._set(False)

    async def release(self) -> None:
        """Give the Lease up (empty holder, 1 s duration) when this replica holds it."""
        try:
            async with asyncio.timeout(max(self.renew, 1.0) * 2):
                lease = await self._api.read_namespaced_lease(self.name, self.namespace)
                if lease.spec is None or lease.spec.holder_identity != self.identity:
                    return
                now = self.clock.now()
                lease.spec.holder_identity = ""
                lease.spec.lease_duration_seconds = 1
                lease.spec.renew_time = _micro(now)  # type: ignore[assignment]
                lease.spec.acquire_time = _micro_time(lease.spec.acquire_time, now)  # type: ignore[assignment]
                await self._api.replace_namespaced_lease(self.name, self.namespace, lease)
            log.info("lease released", lease=f"{self.namespace}/{self.name}", identity=self.identity)
        except (ApiException, OSError, TimeoutError) as e:
            log.warning("cannot release the lease", error=repr(e))

    async def run(self, stop: asyncio.Event) -> None:
        """Compete for the Lease and keep it while possible, until ``stop``; then release it if held."""
        election = LeaderElection(self._config)
        try:
            while not stop.is_set():
                try:
                    await unless_stopped(election.run(), stop)
                except Stopped:
                    break
                except Exception as e:  # never expected (``_Lease`` does not raise): compete again
                    log.warning("leader election failed", error=repr(e))
                self._set(False)  # the library's run returns when the leadership is lost
                await self.clock.sleep(self.renew, stop)
        finally:
            was = self._leader
            self._set(False)
            if was:
                await self.release()
