"""The engine as clusters grow (``python -m bench scale``): one pass and ``--until-stable`` from 500 to 10,000
nodes (ten pods a node), each size in a process of its own, and the time per pass as a picture.

What it measures, per size, on the decision-engine benchmark's generated cluster (``disruption_cluster``):

- **a full pass**, with explanations: what the planner computes whenever something it reads has changed (a pod
  arrived, a node left), the engine's whole work;
- **``--until-stable``**: passes until nothing changes (``ebb.core.plan.make_plan``), their number, the cost
  before and after, and the process's peak RSS.

The picture (``--write``: docs/img/scale.png) draws the full and the settled pass against the cluster size on
log scales, so a straight line is a power law and its slope the exponent.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

#: the cluster sizes (nodes; pods are ten times as many, DaemonSet pods included)
SIZES = (500, 1_000, 2_000, 5_000, 10_000)
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
    snapshot = parse_documents(disruption_cluster(nodes, PODS_PER_NODE * nodes), bundled_catalog=bundled_catalog)
    built = time.perf_counter() - started
    options = EngineOptions(explain=True)
    passes = []
    for _ in range(2):
        started = time.perf_counter()
        first = run_pass(options.view_of(snapshot, moment), options)
        passes.append(time.perf_counter() - started)
    started = time.perf_counter()
    plan = make_plan(snapshot, moment, until_stable=True)
    until = time.perf_counter() - started
    steps = plan.steps or ()
    return {"nodes": len(snapshot.nodes), "pods": len(snapshot.pods), "build_seconds": built,
            "pass_seconds": min(passes), "commands": len(first.commands),
            "until_stable_seconds": until, "steps": len(steps), "cost_before": first.cost_before,
            "cost_final": steps[-1].cost_after if steps else first.cost_before, "peak_rss_mib": peak_rss_mib()}


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
             "| nodes / pods | full pass, with explanations | settled pass | `--until-stable` | cost before → after "
             "| peak RSS |", "|---|---|---|---|---|---|"]
    for r in results:
        settled = f"{r['settled_seconds'] * 1000:.1f} ms" if r.get("settled_seconds") is not None else "—"
        lines.append(f"| {r['nodes']:,} / {r['pods']:,} | {r['pass_seconds']:.2f} s | {settled} | "
                     f"{r['until_stable_seconds']:.1f} s, {r['steps']} passes | ${r['cost_before']:,.2f}/h → "
                     f"${r['cost_final']:,.2f}/h | {r['peak_rss_mib']:,.0f} MiB |")
    lines.append("")
    if picture is not None and draw(results, picture):
        lines += [f"![Time per pass against cluster size, log scales]({picture.relative_to('docs')})", ""]
    return lines


def draw(results: list[dict[str, Any]], path: Path) -> bool:
    """The time per pass against the cluster size on log scales, full and settled; False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    nodes = [r["nodes"] for r in results]
    figure, axes = plt.subplots(figsize=(7, 4.5), dpi=120)
    axes.plot(nodes, [r["pass_seconds"] for r in results], "o-", label="full pass (something changed)")
    settled = [(r["nodes"], r["settled_seconds"]) for r in results if r.get("settled_seconds") is not None]
    if settled:
        axes.plot([n for n, _ in settled], [s for _, s in settled], "s-", label="settled pass (nothing changed)")
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("nodes in the cluster (ten pods a node), log scale")
    axes.set_ylabel("seconds per planner pass, log scale")
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
