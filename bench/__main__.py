"""`make bench`: ebb's benchmarks, each case in its own process so peak memory is its own.

    python -m bench [simulator|simpeer|engine|scale|memory|load|watcher|backtest|work|peer|chaos|all]
                    [--write docs/benchmarks.md]
    python -m bench calibrate [--write docs/backtest.md]
    python -m bench tradeoff [--smoke] [--write docs/benchmarks.md]
    python -m bench peer --smoke

- simulator: Karpenter's scheduling benchmark reproduced (400 fake instance types, five pod groups),
  n = 100, 1,000, 5,000, 20,000 pods: pods/s, nodes launched, peak RSS, and the launched price against
  the LP-relaxation lower bound over instance types.
- simpeer: the simulator beside Karpenter v1.14.1's own ``BenchmarkScheduling`` (``bench.simpeer``), the same
  workload and sizes, interleaved rounds (ebb, Karpenter, ebb, Karpenter): each side's time and nodes launched, and
  the ratio per size; skipped, saying why, without Go or Karpenter's module in the Go module cache.
- engine: a generated 2,000-node / 20,000-pod cluster: one full pass (with explanations) and
  `--until-stable`, and the final cost against a lower bound.
- scale: the engine from 500 to 10,000 nodes (ten pods a node, ``bench.scale``): a full pass, a settled pass and
  ``--until-stable`` per size, peak RSS, and the time per pass as a log-scale picture (docs/img/scale.png).
- memory: a 10,000-node snapshot read from YAML and planned once: peak RSS.
- load: synthetic watch events for 2,000 nodes and 20,000 pods through the cluster-watcher → a real Kafka →
  the real consolidation-planner on PostgreSQL (``bench.load``): ingest events/s, and the latency from a node
  becoming empty to its approved command (p50/p99).
- watcher: the cluster-watcher alone, the load benchmark's synthetic watch events into a real Kafka until the
  last acknowledgement (``bench.load.case_watcher``): events/s and CPU microseconds per event, 3 runs; not part of
  ``all``. ``python -m bench.watcher_path`` measures the same path without servers (CPU only).
- backtest: a simulated day of ``batch-bursts`` on the 300-node example with two policies through ``ebb
  backtest`` (``bench.backtest``; ``EBB_BENCH_BACKTEST_DURATION`` shortens it), against the target of a day
  with two policies in 60 s.
- work: the instructions one simulated hour of that back-test executes, counted by valgrind (``bench.work``):
  the same on every run of the same code, so two commits can be compared on a machine whose speed varies
  (``EBB_BENCH_WORK_BASE=REV`` counts that commit beside the checkout); not part of ``all``.
- peer: the side by side with the real Karpenter (``bench.peer``): one seeded workload trace on the local control
  plane, Karpenter alone (consolidateAfter 0s, then 30s) and Karpenter with its disruption off plus ebb's services;
  cost, time to settle, churn, evictions, pending time per side. About 25 minutes a side, so ``all`` leaves it
  out: run ``python -m bench peer`` on its own. ``--smoke``: a tiny trace on a Karpenter and an ebb side in a few
  minutes, a check that the harness works (never written to a page).
- calibrate: the back-test against the real Karpenter (``bench.calibrate``): the peer's trace (bursty and
  diurnal, seeds 1-3, the short size) on the real Karpenter and in ``ebb backtest`` with the matching built-in
  policy, figure by figure; ``--write docs/backtest.md`` writes its section. Not part of ``all``.
- tradeoff: the trade-off picture (``bench.tradeoff``): node-hour cost against churn and against evictions for
  many settings of Karpenter (ebb's simulation of it) and of ebb in the calibrated back-test, on the peer's traces,
  each side's Pareto frontier, and the goal checked against every Karpenter setting on its frontier; the picture
  goes to docs/img/ with ``--write``. Not part of ``all``. ``--smoke``: two settings a side on one short trace
  (never written to a page).
- chaos: the chaos run, 10 minutes on 40 KWOK nodes (``bench.chaos``: services SIGKILLed at random, Kafka,
  PostgreSQL and the apiserver restarted, every invariant checked); not part of ``all`` (about 20 minutes).

``--write PAGE`` writes the run's sections into the page's results block (``write_results``): the only part of
docs/benchmarks.md that names a machine and a date. Timings are wall-clock on the machine named there; they are
measurements, never test assertions.
"""

from __future__ import annotations

import gc
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench.measure import peak_rss_mib

NOW = "2026-11-23T18:30:00Z"
SIM_SIZES = (100, 1_000, 5_000, 20_000)


PEAK_RSS = ("import re;peak=lambda:int(re.search(r'VmHWM:\\s+(\\d+)',open('/proc/self/status').read())[1])/1024")


def lp_lower_bound(types: list[tuple[float, list[float]]], demand: list[float]) -> float:
    """min sum(price_t * x_t) s.t. sum(alloc_t * x_t) >= demand, x >= 0 (fractional nodes)."""
    from scipy.optimize import linprog  # type: ignore[import-untyped]

    prices = np.array([p for p, _ in types])
    alloc = np.array([a for _, a in types]).T  # resources x types
    res = linprog(prices, A_ub=-alloc, b_ub=-np.array(demand), bounds=(0, None), method="highs")
    return float(res.fun) if res.success else float("nan")


def _catalog_bound(snapshot: Any, pods: Any, allowed_capacity: set[str] | None = None) -> tuple[float, float]:
    """(LP bound, simple bound) for hosting `pods` on the snapshot's instance types."""
    demand = [float(sum(p.spec.requests.get("cpu", 0) for p in pods)),
              float(sum(p.spec.requests.get("memory", 0) for p in pods)),
              float(len(pods))]
    types = []
    for it in snapshot.instance_types:
        offers = [o.price for o in it.offerings if o.available
                  and (allowed_capacity is None or o.capacity_type in allowed_capacity)]
        if not offers:
            continue
        alloc = [float(it.capacity.get("cpu", 0) - it.overhead.get("cpu", 0)),
                 float(it.capacity.get("memory", 0) - it.overhead.get("memory", 0)),
                 float(it.capacity.get("pods", 0))]
        types.append((min(offers), alloc))
    simple = max(demand[r] * min(p / a[r] for p, a in types if a[r] > 0) for r in range(2))
    return lp_lower_bound(types, demand), simple


#: the engine case's second `--until-stable`: multi-node consolidation may launch this many replacements
REPACK = 2
#: and its third, with every NodePool's minimumSavingPerEvictedPod at this ($/h per evicted pod)
REPACK_EVICTION_PRICE = 0.007


def _until_stable_figures(plan: Any, seconds: float) -> dict[str, Any]:
    """What the engine case reports of an `--until-stable` plan made in ``seconds``."""
    steps = plan.steps or (plan.first,)
    return {"seconds": seconds, "steps": len(plan.steps or ()), "cost_final": steps[-1].cost_after,
            "moved": _moved(plan), "launched": sum(len(c.replacements) for s in plan.steps or () for c in s.commands)}


def _repack_row(label: str, figures: dict[str, Any], cost_before: float, bound: float) -> str:
    """A row of the engine section for one `--until-stable` variant (`_until_stable_figures`)."""
    saved = cost_before - figures["cost_final"]
    return (f"| {label} | {figures['seconds']:.1f} s, {figures['steps']} passes; ${figures['cost_final']:,.2f}/h, "
            f"{figures['cost_final'] / bound:.3f} of the LP bound; {figures['moved']:,} pods moved, "
            f"{figures['moved'] / saved:.1f} per $/h saved; {figures['launched']:,} nodes launched |")


def _moved(plan: Any) -> int:
    """The pods an `--until-stable` plan's commands move (each command's placements: the pods of its nodes)."""
    return sum(len(c.placements) for s in plan.steps or () for c in s.commands)


def _from_scratch(snapshot: Any) -> dict[str, Any]:
    """Every pod of ``snapshot`` placed again on new nodes only, as the simulator provisions (each pod's constraints
    and NodePools' requirements kept, any NodePool its needs admit; nothing pins a node: do-not-disrupt pods, PDBs,
    budgets and windows are ignored): the cost of those nodes per NodePool, and the pods left unplaced. Not a bound
    (the provisioning is greedy), but a cost reachable by placement alone, which the per-NodePool bound, keeping each
    pod in its NodePool, need not be under."""
    from ebb.core.simulator.scheduler import simulate

    result = simulate(snapshot, [], remove=[n.name for n in snapshot.nodes], max_new=10**9)
    per_pool: dict[str, float] = {}
    for node in result.new_nodes:
        per_pool[node.nodepool] = per_pool.get(node.nodepool, 0.0) + node.price
    return {"cost": sum(per_pool.values()), "nodes": len(result.new_nodes), "per_pool": per_pool,
            "unplaced": len(result.unplaceable)}


def _pool_bound(snapshot: Any) -> float:
    """Sum over NodePools of the LP bound for the pods now on that pool's nodes, on the instance types and
    offerings that pool may launch (its requirements; allocatable net of overhead and DaemonSets).
    Pods stay in their pool (their tolerations and affinities put them there); everything else that
    pins a node (do-not-disrupt, PDBs, budgets, spreads) is ignored, so this is a lower bound."""
    from ebb.core.simulator.scheduler import Scheduler

    sched = Scheduler(snapshot)
    node_pool = {n.name: n.nodepool for n in snapshot.nodes}
    total = 0.0
    for pool in sched.pools:
        pods = [p for p in snapshot.pods if p.needs_rescheduling and node_pool.get(p.node_name) == pool.pool.name]
        if not pods or not len(pool.combo_type):
            continue
        demand = [float(sum(p.spec.requests.get("cpu", 0) for p in pods)),
                  float(sum(p.spec.requests.get("memory", 0) for p in pods)), float(len(pods))]
        cpu, mem, npods = (sched.r_index[r] for r in ("cpu", "memory", "pods"))
        types = []
        for t, _ in enumerate(pool.types):
            prices = pool.combo_price[pool.combo_type == t]
            alloc = pool.type_alloc[t]
            types.append((float(prices.min()), [float(alloc[cpu]), float(alloc[mem]), float(alloc[npods])]))
        total += lp_lower_bound(types, demand)
    return total


# -- cases (run in a child process) -------------------------------------------------------------------


def case_simulator(n: int) -> dict[str, Any]:
    from bench.generators import karpenter_scheduling_workload
    from ebb.core.simulator.scheduler import Scheduler
    from ebb.core.snapshot import parse_documents

    snapshot = parse_documents(karpenter_scheduling_workload(n))
    pods = list(snapshot.pods)
    # the parsed workload is the untimed setup (Karpenter makes its pods before its timer too): out of the cycle
    # collector's traversals while the placement is timed, as the planner keeps its long-lived heap
    # (`ebb.adapters.heap`); otherwise a full collection over the setup's objects can land in the timed part
    gc.collect()
    gc.freeze()
    start, cpu_start = time.perf_counter(), time.process_time()
    state = Scheduler(snapshot, extra_pods=()).new_state()
    failures, _ = state.place_all(pods, max_new=10**9)
    new_nodes = state.new_nodes()
    took, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    gc.unfreeze()
    price = sum(n.price for n in new_nodes)
    lp, simple = _catalog_bound(snapshot, pods)
    return {"pods": n, "seconds": took, "cpu_seconds": cpu, "pods_per_second": n / took, "nodes": len(new_nodes),
            "unplaced": len(failures), "price": price, "lp_bound": lp, "simple_bound": simple,
            "peak_rss_mib": peak_rss_mib()}


def case_engine() -> dict[str, Any]:
    from bench.generators import disruption_cluster
    from ebb.adapters.catalog import bundled_catalog
    from ebb.core.cluster import ClusterView
    from ebb.core.engine import run_pass
    from ebb.core.methods.base import EngineOptions
    from ebb.core.plan import make_plan
    from ebb.core.snapshot import parse_documents

    now = datetime.fromisoformat(NOW.replace("Z", "+00:00"))
    snapshot = parse_documents(disruption_cluster(), bundled_catalog=bundled_catalog)
    start = time.perf_counter()
    first = run_pass(ClusterView.build(snapshot, now), EngineOptions(explain=True))
    one_pass = time.perf_counter() - start
    start = time.perf_counter()
    plan = make_plan(snapshot, now, until_stable=True)
    until = time.perf_counter() - start
    priced_docs = disruption_cluster()
    for doc in priced_docs:
        if doc.get("kind") == "NodePool":
            doc["spec"].setdefault("disruption", {})["minimumSavingPerEvictedPod"] = REPACK_EVICTION_PRICE
    priced_snapshot = parse_documents(priced_docs, bundled_catalog=bundled_catalog)

    def variant(of: Any, options: EngineOptions) -> dict[str, Any]:
        """An `--until-stable` variant's figures, its plan dropped and collected before the next is timed (plans
        kept alive would make each later variant's collections slower)."""
        gc.collect()
        started = time.perf_counter()
        made = make_plan(of, now, until_stable=True, options=options)
        return _until_stable_figures(made, time.perf_counter() - started)

    variants = {"repacked": variant(snapshot, EngineOptions(max_replacements=REPACK)),
                "priced": variant(priced_snapshot, EngineOptions(max_replacements=REPACK)),
                # the optimizer search: alone, then with the repack and the eviction price
                "optimized": variant(snapshot, EngineOptions(search="optimizer")),
                "optimized_priced": variant(priced_snapshot, EngineOptions(max_replacements=REPACK,
                                                                          search="optimizer"))}
    steps = plan.steps or ()
    final = steps[-1].cost_after if steps else first.cost_before
    lp = _pool_bound(snapshot)
    scratch = _from_scratch(plan.final or snapshot)
    end = plan.final or snapshot
    end_view = ClusterView.build(end, now)
    final_per_pool: dict[str, float] = {}
    for node in end.nodes:
        pool = node.nodepool or ""
        final_per_pool[pool] = final_per_pool.get(pool, 0.0) + end_view.price.get(node.name, 0.0)
    methods: dict[str, int] = {}
    for step in steps:
        for command in step.commands:
            methods[command.method] = methods.get(command.method, 0) + len(command.nodes)
    return {"nodes": len(snapshot.nodes), "pods": len(snapshot.pods), "pass_seconds": one_pass,
            "first_commands": [(c.method, len(c.nodes)) for c in first.commands],
            "blocked": len(first.blocked), "until_stable_seconds": until, "steps": len(steps),
            "cost_before": first.cost_before, "cost_final": final, "lp_bound": lp, "from_scratch": scratch,
            "final_per_pool": final_per_pool, "moved": _moved(plan),
            **variants,
            "nodes_disrupted_by_method": methods, "peak_rss_mib": peak_rss_mib()}


def case_memory(nodes: int, pods: int) -> dict[str, Any]:
    from bench.generators import disruption_cluster, write_yaml
    from ebb.adapters.snapshot_files import load_snapshot
    from ebb.core.plan import make_plan

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cluster.yaml"
        write_yaml(disruption_cluster(nodes, pods), path)
        size = path.stat().st_size
        # measure only ebb: a fresh process reads the file and plans once
        code = (PEAK_RSS + ";import json,time;from datetime import datetime;"
                "from ebb.adapters.snapshot_files import load_snapshot;from ebb.core.plan import make_plan;"
                f"t=time.perf_counter();s=load_snapshot([{str(path)!r}]);l=time.perf_counter()-t;"
                f"p=make_plan(s, datetime.fromisoformat({NOW.replace('Z', '+00:00')!r}));"
                "print(json.dumps({'load_seconds':l,'total_seconds':time.perf_counter()-t,"
                "'peak_rss_mib':peak()}))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    del load_snapshot, make_plan
    result: dict[str, Any] = json.loads(out.stdout)
    result.update({"nodes": nodes, "pods": pods, "yaml_mib": size / 2**20})
    return result


# -- driver -------------------------------------------------------------------------------------------------


def _child(args: list[str], *, progress: bool = False) -> dict[str, Any]:
    """Run a case in a fresh process; its stderr is shown as it goes when ``progress``."""
    out = subprocess.run([sys.executable, "-m", "bench", "_case", *args], stdout=subprocess.PIPE,
                         stderr=None if progress else subprocess.PIPE, text=True,
                         check=False, env={**os.environ, "PYTHONHASHSEED": "0"})
    if out.returncode != 0:
        raise SystemExit(f"bench case {args} failed:\n{(out.stderr or '')[-3000:]}")
    value: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return value


def cpu_model(cpuinfo_path: Path = Path("/proc/cpuinfo")) -> str:
    """The processor's name as /proc/cpuinfo gives it (``platform.processor()`` is empty on Linux): two runs of
    the same code on two vms of one name can differ by half, and the model is often why. Where the file has no
    ``model name`` (not Linux, some ARM kernels), what ``platform`` knows."""
    try:
        with cpuinfo_path.open(encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "an unknown processor"


def machine_line() -> str:
    """The line every results section is written under: the machine, the interpreter and the time of the run."""
    return (f"Machine: {platform.node() or 'this machine'}, {os.cpu_count()} cores ({cpu_model()}), Python "
            f"{platform.python_version()} ({os.path.realpath(sys.executable)}), {platform.platform()}; "
            f"run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC.")


def run(which: str, *, pictures: bool = False) -> str:
    """The sections of the benchmarks ``which`` names; ``pictures``: draw their pictures into docs/img too."""
    lines = [machine_line(), ""]
    if which in ("simulator", "all"):
        lines += ["### Scheduling simulator: Karpenter's scheduling benchmark", "",
                  "| pods | seconds | pods/s | nodes launched | unplaced | price $/h | LP bound $/h | "
                  "price / LP | peak RSS MiB |", "|---|---|---|---|---|---|---|---|---|"]
        for n in SIM_SIZES:
            r = _child(["simulator", str(n)])
            print(f"simulator {n}: {r['seconds']:.2f}s", file=sys.stderr)
            lines.append(f"| {n:,} | {r['seconds']:.2f} | {r['pods_per_second']:,.0f} | {r['nodes']:,} | "
                         f"{r['unplaced']} | {r['price']:,.1f} | {r['lp_bound']:,.1f} | "
                         f"{r['price'] / r['lp_bound']:.3f} | {r['peak_rss_mib']:.0f} |")
        lines.append("")
    if which in ("simpeer", "all"):
        from bench import simpeer

        lines += simpeer.render(simpeer.run_rounds(lambda n: _child(["simulator", str(n)]),
                                                   log=lambda text: print(text, file=sys.stderr)))
    if which in ("engine", "all"):
        r = _child(["engine"])
        print(f"engine: pass {r['pass_seconds']:.2f}s until-stable {r['until_stable_seconds']:.1f}s", file=sys.stderr)
        lines += ["### Decision engine: 2,000 nodes, 20,000 pods", "",
                  "| figure | value |", "|---|---|",
                  f"| nodes / pods | {r['nodes']:,} / {r['pods']:,} |",
                  f"| one full pass, with explanations | {r['pass_seconds']:.2f} s |",
                  f"| first pass commands | {r['first_commands']} |",
                  f"| `--until-stable` | {r['until_stable_seconds']:.1f} s, {r['steps']} passes |",
                  f"| nodes disrupted by method | {r['nodes_disrupted_by_method']} |",
                  f"| cost before / after | ${r['cost_before']:,.2f}/h / ${r['cost_final']:,.2f}/h |",
                  f"| final cost per NodePool | "
                  f"{', '.join(f'{p} ${c:,.2f}' for p, c in sorted(r['final_per_pool'].items()))} |",
                  f"| LP lower bound (per NodePool: its pods' requests on the types it may launch) | "
                  f"${r['lp_bound']:,.2f}/h |",
                  f"| final cost / LP bound | {r['cost_final'] / r['lp_bound']:.3f} |",
                  f"| pods moved, per $/h saved | {r['moved']:,}, "
                  f"{r['moved'] / (r['cost_before'] - r['cost_final']):.1f} |",
                  *[_repack_row(label, r[key], r['cost_before'], r['lp_bound']) for key, label in (
                      ("repacked", f"`--until-stable --max-replacements {REPACK}`"),
                      ("priced", "the same, every NodePool's `minimumSavingPerEvictedPod` at "
                                 f"{REPACK_EVICTION_PRICE}"),
                      ("optimized", "`--until-stable --search optimizer`"),
                      ("optimized_priced", f"`--search optimizer --max-replacements {REPACK}`, every NodePool's "
                                           f"`minimumSavingPerEvictedPod` at {REPACK_EVICTION_PRICE}"))
                    if key in r],
                  "| the final cluster's pods placed again on new nodes only (constraints kept, any NodePool they "
                  "admit; do-not-disrupt, PDBs and budgets ignored) | "
                  f"${r['from_scratch']['cost']:,.2f}/h on {r['from_scratch']['nodes']:,} nodes "
                  f"({', '.join(f'{p} ${c:,.2f}' for p, c in sorted(r['from_scratch']['per_pool'].items()))}; "
                  f"{r['from_scratch']['unplaced']} unplaced): "
                  f"{r['from_scratch']['cost'] / r['cost_final']:.2f} of the final cost |",
                  f"| peak RSS | {r['peak_rss_mib']:.0f} MiB |", ""]
    if which in ("scale", "all"):
        from bench import scale

        picture = scale.PICTURE if pictures else None
        lines += scale.render(scale.run_sizes(_child, log=lambda text: print(text, file=sys.stderr)), picture=picture)
    if which in ("memory", "all"):
        r = _child(["memory", "10000", "50000"])
        print(f"memory: {r['peak_rss_mib']:.0f} MiB", file=sys.stderr)
        lines += ["### Memory: a 10,000-node snapshot", "",
                  "| nodes | pods | YAML MiB | read s | read + one pass s | peak RSS MiB |",
                  "|---|---|---|---|---|---|",
                  f"| {r['nodes']:,} | {r['pods']:,} | {r['yaml_mib']:.0f} | {r['load_seconds']:.1f} | "
                  f"{r['total_seconds']:.1f} | {r['peak_rss_mib']:.0f} |", ""]
    if which in ("load", "all"):
        from bench.load import render, render_profile

        r = _child(["load"], progress=True)
        lines += render(r)
        print("load: profiling the watcher's per-event code and one steady-state pass in-process", file=sys.stderr)
        lines += render_profile(_child(["load-profile"]))
    if which == "watcher":  # not part of `all`: the load benchmark measures the watcher's rate too
        from bench.load import render_watcher

        lines += render_watcher(_child(["watcher"], progress=True))
    if which in ("backtest", "all"):
        from bench.backtest import render as render_backtest

        lines += render_backtest(_child(["backtest"], progress=True))
    if which == "work":  # not part of `all`: valgrind, about 6 minutes
        from bench.work import render as render_work

        lines += render_work(_child(["work"], progress=True))
    if which == "chaos":  # not part of `all`: about 20 minutes
        from bench.chaos import render as render_chaos

        lines += render_chaos(_child(["chaos"], progress=True))
    if which == "peer":  # not part of `all`: about an hour for the three sides
        from bench import peer

        lines += peer.render(peer.run_sides(lambda args: _child(args, progress=True)))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if argv[:1] == ["_case"]:
        kind = argv[1]
        if kind == "simulator":
            result = case_simulator(int(argv[2]))
        elif kind == "engine":
            result = case_engine()
        elif kind == "scale":
            from bench.scale import case_scale

            result = case_scale(int(argv[2]), NOW)
        elif kind == "load":
            from bench.load import case_load

            result = case_load()
        elif kind == "watcher":
            from bench.load import case_watcher

            result = case_watcher()
        elif kind == "load-profile":
            from bench.load import case_profile

            result = case_profile()
        elif kind == "backtest":
            from bench.backtest import case_backtest

            result = case_backtest()
        elif kind == "work":
            from bench.work import case_work

            result = case_work()
        elif kind == "chaos":
            from bench.chaos import case_chaos

            result = case_chaos()
        elif kind == "peer":
            from bench.peer import case_peer

            result = case_peer(argv[2])
        elif kind == "load-planner":
            from bench.load import planner_process

            planner_process(json.loads(argv[2]))
            return 0
        else:
            result = case_memory(int(argv[2]), int(argv[3]))
        print(json.dumps(result))
        return 0
    which = argv[0] if argv and not argv[0].startswith("-") else "all"
    if which == "calibrate":  # not part of `all`: real runs, about an hour at the short size
        from bench import calibrate

        section = calibrate.run()
        print("\n".join(section))
        if "--write" in argv:
            target = Path(argv[argv.index("--write") + 1])
            target.write_text(calibrate.write_section(target.read_text() if target.exists() else "", section))
        return 0
    if which == "tradeoff":  # not part of `all`: hundreds of back-tests
        return _tradeoff(argv)
    if which == "peer" and "--smoke" in argv:
        if "--write" in argv:
            raise SystemExit("a smoke run's figures mean nothing: --smoke is never written to a page")
        os.environ["EBB_BENCH_PEER"] = "smoke"  # read by the sides' processes
    text = run(which, pictures="--write" in argv)
    print(text)
    if "--write" in argv:
        target = Path(argv[argv.index("--write") + 1])
        target.write_text(write_results(target.read_text() if target.exists() else "", text))
    return 0


def _tradeoff(argv: list[str]) -> int:
    """``python -m bench tradeoff [--smoke] [--write PAGE]``: the sweep, its picture (next to PAGE in img/, else in
    the sweep's output directory) and its results section."""
    from bench import tradeoff

    smoke = "--smoke" in argv
    target = Path(argv[argv.index("--write") + 1]) if "--write" in argv else None
    if smoke and target is not None:
        raise SystemExit("a smoke run's figures mean nothing: --smoke is never written to a page")
    image = target.parent / "img" / tradeoff.IMAGE if target is not None else tradeoff.out_dir() / tradeoff.IMAGE
    text = "\n".join([machine_line(), "", *tradeoff.run(image, smoke=smoke)])
    print(text)
    if target is not None:
        target.write_text(write_results(target.read_text() if target.exists() else "", text))
    return 0


RESULTS_START = "<!-- bench:results -->"
RESULTS_END = "<!-- /bench:results -->"


def write_results(doc: str, new: str) -> str:
    """``doc`` with the results of a run written between its two markers and nothing else changed.

    The block between ``RESULTS_START`` and ``RESULTS_END`` (docs/benchmarks.md's "Results" section) is the one
    place of the page that names a machine and a date: every section in it is replaced by the section of the same
    title the run made, with the run's machine line under its heading, and the sections this run did not make
    (``peer``, ``chaos``, ``watcher``, ``work`` are not part of ``all``) are kept. A page without the markers gets a
    "Results" section at its end; a page with a start marker and no end marker (an older page) has its block run
    to the end of the page."""
    head, start, rest = doc.partition(RESULTS_START)
    if not start:
        head = (doc.rstrip("\n") + "\n\n" if doc.strip() else "") + "## Results\n\n"
        rest = ""
    old, _, tail = rest.partition(RESULTS_END)
    block = merge_results(old, new).strip("\n")
    return head + RESULTS_START + "\n\n" + block + "\n\n" + RESULTS_END + (tail if tail.strip() else "\n")


def _title(heading: str) -> str:
    """A results section's identity: its heading without the parenthesised sizes."""
    return heading.split(" (", 1)[0].strip()


def merge_results(old: str, new: str) -> str:
    """The results of a run merged into those written before: sections (``### ...``) of the same title are
    replaced, new ones appended, the others kept as they were. The run's machine line (its first lines, before any
    section) goes under the heading of each of its sections, so every section names the machine and the time it
    was measured on; the text before the first section of ``old`` stays as it was."""
    def split(text: str) -> tuple[list[str], list[tuple[str, list[str]]]]:
        preface: list[str] = []
        sections: list[tuple[str, list[str]]] = []
        for line in text.strip("\n").splitlines():
            if line.startswith("### "):
                sections.append((_title(line), [line]))
            elif sections:
                sections[-1][1].append(line)
            else:
                preface.append(line)
        return preface, sections

    old_preface, old_sections = split(old)
    new_preface, new_sections = split(new)
    machine = [line for line in new_preface if line.strip()]
    fresh = {title: [body[0], "", *machine, *body[1:]] for title, body in new_sections}
    merged = [body if title not in fresh else fresh.pop(title) for title, body in old_sections]
    merged.extend(fresh.values())
    out = list(old_preface)
    for body in merged:
        while out and not out[-1].strip():
            out.pop()
        out += ["", *body]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
