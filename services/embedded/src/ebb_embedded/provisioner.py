"""The embedded mode's provisioner: Karpenter's provisioning loop on the simulated cluster.

It wakes when kube-scheduler leaves a pod Pending (``WorkloadCluster.unschedulable``), keeps the batch open
as Karpenter does (until no new Pending pod came for 1 s, at most 10 s: ``ebb.core.provisioning.batch_wait``),
then asks the pure core which nodes to launch (``ebb.core.provisioning.launches``: the simulator, with the
nodes still booting counted as capacity) and launches each as the executor launches a replacement (the
same ``ebb.core.launch`` Node, priced from the catalog, counted as a launch). A launched node becomes Ready
its boot time later (``SimulatedCluster.boot_time``: ``boot_seconds``, or a cloud's 30-90 s drawn per node with
``boot_seconds_max``), when kube-scheduler is woken to bind the pods waiting for it.

Names come from the run's seed; every wait is on the injected clock (simulated time).
"""

from __future__ import annotations

import asyncio
import random

import structlog

from ebb.adapters.clock import Clock
from ebb.contracts import Replacement
from ebb.core.launch import LaunchError
from ebb.core.provisioning import BATCH_IDLE_SECONDS, batch_wait, launches
from ebb_embedded.workload import WorkloadCluster

log = structlog.get_logger("ebb_embedded.provisioner")


async def run_provisioner(cluster: WorkloadCluster, clock: Clock, stop: asyncio.Event, *, seed: int) -> None:
    """Launch nodes for the pods kube-scheduler cannot place, until ``stop``."""
    names = random.Random(seed)
    booting: set[asyncio.Task[bool]] = set()
    try:
        while not stop.is_set():
            if not await clock.wait(cluster.unschedulable, stop) or stop.is_set():
                return
            opened = last_arrival = clock.monotonic()
            seen = cluster.pending_count()
            while (left := batch_wait(opened, last_arrival, clock.monotonic())) > 0:
                if await clock.sleep(min(left, BATCH_IDLE_SECONDS), stop):
                    return
                now_pending = cluster.pending_count()
                if now_pending > seen:
                    last_arrival = clock.monotonic()
                seen = now_pending
            cluster.unschedulable.clear()
            snapshot = cluster.snapshot()
            pending = [p for p in snapshot.pods if p.node_name is None and p.phase == "Pending"]
            plan = launches(snapshot, pending, in_flight=cluster.in_flight())
            for new in plan.launches:
                name = f"{new.nodepool}-{names.getrandbits(40):010x}"
                replacement = Replacement.model_validate({
                    "node_pool": new.nodepool, "instance_types": new.instance_types,
                    "capacity_type": new.capacity_type, "zones": new.zones, "price": round(new.price, 6),
                    "labels": dict(new.labels)})
                try:
                    await cluster.provision(name, replacement)
                except LaunchError as exc:
                    log.warning("launch failed", node=name, error=str(exc))
                    continue
                task = asyncio.create_task(_boot(cluster, clock, name, stop), name=f"boot {name}")
                booting.add(task)
                task.add_done_callback(booting.discard)
    finally:
        for task in list(booting):
            task.cancel()
        await asyncio.gather(*booting, return_exceptions=True)


async def _boot(cluster: WorkloadCluster, clock: Clock, name: str, stop: asyncio.Event) -> bool:
    if await clock.sleep(cluster.boot_time(name), stop):
        return False
    return await cluster.boot(name)
