"""The engine as clusters grow (``python -m bench scale``): one pass and ``--until-stable`` from 500 to 10,000
nodes (ten pods a node), each size in a process of its own, and the time per pass as a picture.

What it measures, per size, on the decision-engine benchmark's generated cluster (``disruption_cluster``):

- **a full pass**, with explanations: what the planner computes whenever something it reads has changed (a pod
  arrived, a node left), the engine's whole work;
- **the planner's passes** (``ebb_consolidation_planner.planner.Planner`` on the objects as the watcher's topic
  gives them, a SQLite decision store, ``PassInputs`` and the frozen heap as the distributed planner has them:
  the store read every pass, ``FREEZE_HEAP``): its first pass (every object parsed), then, `RIPE_AFTER` later
  (every node past its consolidateAfter), passes until one proposes nothing, `SETTLED` passes on the
  **settled** cluster with the clock moving `INTERVAL` seconds a pass, as the planner's own passes come (nothing
  changed but the time: answered from the last pass until something the pass reads moves with time, such as the
  disruption cost's lifetime grid), and `CHANGES` passes each after one node's pods
  changed (one pod deleted, the pods taken spread through the cluster): computed, with what the last computed pass
  kept (``PassInputs.alone``), their median wall and CPU seconds and the slowest;
- **``--until-stable``**: passes until nothing changes (``ebb.core.plan.make_plan``), their number, the cost
  before and after, and the process's peak RSS.

The picture (``--write``: docs/img/scale.png) draws the full and the settled pass against the cluster size on
log scales, so a straight line is a power law and its slope the exponent.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

#: the cluster sizes (nodes; pods are ten times as many, DaemonSet pods included)
SIZES = (500, 1_000, 2_000, 5_000, 10_000)
#: the planner's passes after one pod left, each after one more (where the pod was decides how much is computed again)
CHANGES = 5
#: the planner's passes on the settled cluster, the clock moving `INTERVAL` seconds before each (the planner's interval)
SETTLED = 6
INTERVAL = 10.0
#: how long after the snapshot's moment the planner's passes after its first come: past every consolidateAfter of the
#: generated cluster's NodePools, so that the settled passes see no node ripen
RIPE_AFTER = timedelta(minutes=15)
PODS_PER_NODE = 10
PICTURE = Path("docs/img/scale.png")


def case_scale(nodes: int, now: str) -> dict[str, Any]:
    """One size: a full pass (the better of two, the first also warming the process) and ``--until-stable``,
    with the peak RSS of the process."""
    from bench.generators import disruption_cluster
    from bench.measure import peak_rss_mib
    from ebb.adapters.catalog import bundled_catalog
    from ebb.core.engine import run_pass
    from ebb.core.methods.base import EngineOptions
    from ebb.core.plan import make_plan
    from ebb.core.snapshot import parse_documents

    moment = datetime.fromisoformat(now.replace("Z", "+00:00"))
    started = time.perf_counter()
    documents = disruption_cluster(nodes, PODS_PER_NODE * nodes)
    snapshot = parse_documents(documents, bundled_catalog=bundled_catalog)
    built = time.perf_counter() - started
    options = EngineOptions(explain=True)
    passes = []
    for _ in range(2):
        started = time.perf_counter()
        first = run_pass(options.view_of(snapshot, moment), options)
        passes.append(time.perf_counter() - started)
    planner = asyncio.run(_planner_passes(documents, moment))
    started = time.perf_counter()
    plan = make_plan(snapshot, moment, until_stable=True)
    until = time.perf_counter() - started
    steps = plan.steps or ()
    return {"nodes": len(snapshot.nodes), "pods": len(snapshot.pods), "build_seconds": built,
            "pass_seconds": min(passes), "commands": len(first.commands), **planner,
            "until_stable_seconds": until, "steps": len(steps), "cost_before": first.cost_before,
            "cost_final": steps[-1].cost_after if steps else first.cost_before, "peak_rss_mib": peak_rss_mib()}


async def _planner_passes(documents: list[dict[str, Any]], moment: datetime) -> dict[str, Any]:
    """The planner's first pass, `SETTLED` passes with nothing changed but the clock once its passes propose
    nothing more, and `CHANGES` passes each after one more pod of a busy node was deleted (seconds of ``plan_once``
    each: of the settled ones the median, of the changed ones the median wall and CPU seconds and the slowest), with
    the distributed planner's ``PassInputs`` (the store read every pass); ``settled_reused``: how many of the settled
    passes were answered from the last one."""
    from ebb.adapters.bus import InMemoryBus
    from ebb.adapters.heap import LongLivedHeap
    from ebb.adapters.snapshot_store import SnapshotStore
    from ebb.adapters.store.decision_store import DecisionStore
    from ebb.adapters.store.models import metadata
    from ebb.contracts.messages import ClusterObject
    from ebb.core.methods.base import EngineOptions
    from ebb_consolidation_planner.leadership import AlwaysLeader
    from ebb_consolidation_planner.metrics import Metrics
    from ebb_consolidation_planner.pass_inputs import PassInputs
    from ebb_consolidation_planner.planner import Planner

    def message(doc: dict[str, Any], *, deleted: bool = False) -> ClusterObject:
        meta = doc["metadata"]
        return ClusterObject(kind=doc["kind"], namespace=meta.get("namespace", ""), name=meta["name"],
                             resource_version="2" if deleted else "1", object=None if deleted else doc)

    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))  # a line per finding
    objects = SnapshotStore()
    for doc in documents:
        objects.apply(message(doc))
    with tempfile.TemporaryDirectory(prefix="ebb-bench-scale-") as scratch:
        store = DecisionStore.from_url(f"sqlite:///{Path(scratch) / 'decisions.db'}", "bench-scale")
        async with store.engine.begin() as connection:
            await connection.run_sync(metadata.create_all)
        # the same options as the planner's: the first pass's commands are not proposed (nothing asks for them here),
        # so the store stays as it is and the next passes see only what this function changes; the heap frozen after
        # each computed pass, as the service's (`FREEZE_HEAP`)
        clock = [moment]
        planner = Planner(InMemoryBus(), objects, store, AlwaysLeader(), metrics=Metrics(), clock=lambda: clock[0],
                          options=EngineOptions(explain=True), inputs=PassInputs(objects, store),
                          heap=LongLivedHeap())

        cpu: list[float] = []

        async def timed() -> tuple[float, bool]:
            started, used = time.perf_counter(), time.process_time()
            result = await planner.plan_once()
            cpu.append(time.process_time() - used)
            return time.perf_counter() - started, result is not None and bool(result.commands)

        first, made = await timed()
        # the generated pods started in the minutes before ``moment``: past every NodePool's consolidateAfter (10 min
        # at most) each node is ripe, and nothing more ripens with time alone (a settled cluster's pods are older)
        clock[0] = moment + RIPE_AFTER
        made = True
        # its commands are proposed and never carried out here, so they hold their nodes and budgets: passes until
        # one proposes nothing more (at most a few: the budgets run out), then the cluster is settled for the planner
        for _ in range(20):
            if not made:
                break
            _, made = await timed()
        reused_before, settled = planner.passes_reused, []
        for _ in range(SETTLED):
            clock[0] += timedelta(seconds=INTERVAL)
            settled.append((await timed())[0])
        settled_reused = planner.passes_reused - reused_before
        busy = [d for d in documents if d["kind"] == "Pod" and d["spec"].get("nodeName")
                and (d["metadata"].get("ownerReferences") or [{}])[0].get("kind") != "DaemonSet"]
        changed: list[float] = []
        for at in range(CHANGES):
            objects.apply(message(busy[at * len(busy) // CHANGES], deleted=True))
            changed.append((await timed())[0])
        await store.engine.dispose()
    return {"planner_first_seconds": first, "changed_seconds": statistics.median(changed),
            "changed_cpu_seconds": statistics.median(cpu[-CHANGES:]), "changed_max_seconds": max(changed),
            "settled_seconds": statistics.median(settled), "settled_reused": settled_reused, "settled_passes": SETTLED}


def run_sizes(child: Any, sizes: tuple[int, ...] = SIZES, *, log: Any = print) -> list[dict[str, Any]]:
    """Each size in a process of its own (``child(["scale", n])``), smallest first."""
    results = []
    for nodes in sizes:
        result = child(["scale", str(nodes)])
        log(f"scale {nodes:,} nodes: pass {result['pass_seconds']:.2f}s, until-stable "
            f"{result['until_stable_seconds']:.1f}s ({result['steps']} passes), {result['peak_rss_mib']:.0f} MiB")
        results.append(result)
    return results


def render(results: list[dict[str, Any]], *, picture: Path | None = None) -> list[str]:
    """The Results section: one row per size, and the picture when ``picture`` is given and matplotlib is there."""
    lines = ["### The engine as clusters grow: 500 to 10,000 nodes", "",
             "| nodes / pods | engine: one full pass, with explanations | planner: first pass | planner: after one "
             f"pod left (median of {CHANGES}; CPU; slowest) | planner: settled, the clock moving {INTERVAL:.0f} s a "
             f"pass (median of {SETTLED}; how many answered from the last one) | `--until-stable` | cost "
             "before → after | peak RSS |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        reused = f" ({r['settled_reused']} of {r.get('settled_passes', SETTLED)} reused)"
        lines.append(f"| {r['nodes']:,} / {r['pods']:,} | {r['pass_seconds']:.2f} s | "
                     f"{r['planner_first_seconds']:.2f} s | {r['changed_seconds']:.2f} s ("
                     f"{r.get('changed_cpu_seconds', float('nan')):.2f} s CPU; "
                     f"{r.get('changed_max_seconds', float('nan')):.2f} s) | "
                     f"{r['settled_seconds'] * 1000:.1f} ms{reused} | "
                     f"{r['until_stable_seconds']:.1f} s, {r['steps']} passes | ${r['cost_before']:,.2f}/h → "
                     f"${r['cost_final']:,.2f}/h | {r['peak_rss_mib']:,.0f} MiB |")
    lines.append("")
    if picture is not None and draw(results, picture):
        lines += [f"![Time per pass against cluster size, log scales]({picture.relative_to('docs')})", ""]
    return lines


def draw(results: list[dict[str, Any]], path: Path) -> bool:
    """The planner's time per pass against the cluster size on log scales: after a change, and settled; False
    without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    nodes = [r["nodes"] for r in results]
    figure, axes = plt.subplots(figsize=(7, 4.5), dpi=120)
    axes.plot(nodes, [r["changed_seconds"] for r in results], "o-", label="after a change (one pod left; median)")
    axes.plot(nodes, [r["settled_seconds"] for r in results], "s-",
              label=f"settled, the clock moving {INTERVAL:.0f} s a pass (median)")
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("nodes in the cluster (ten pods a node), log scale")
    axes.set_ylabel("seconds per planner pass (plan_once), log scale")
    axes.set_title("ebb's decision engine: time per pass as the cluster grows")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return True


if __name__ == "__main__":  # a quick look at one size: python -m bench.scale 2000
    import sys

    print(json.dumps(case_scale(int(sys.argv[1]), "2026-11-23T18:30:00Z")))
