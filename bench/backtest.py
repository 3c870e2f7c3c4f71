"""`python -m bench backtest`: the back-test's speed target, a simulated day of ``batch-bursts`` on the 300-node example
with two policies (``karpenter-default`` and examples/backtest/churn-control.yaml), through the real ``ebb
backtest`` command. Reports the wall time (the two policies run in two worker processes, ``ebb backtest``'s
default on this 2-core machine; their CPU time is not the command's to report), the simulated seconds per wall
second, the planner's passes and each policy's summary. ``EBB_BENCH_BACKTEST_DURATION`` (default ``24h``)
shortens the simulated time; ``all`` runs the whole day (half a minute to a minute, with the vm)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ebb_cli.backtest_cmd import default_jobs

REPO = Path(__file__).resolve().parents[1]
START = "2026-11-23T18:30:00Z"


def case_backtest() -> dict[str, Any]:
    duration = os.environ.get("EBB_BENCH_BACKTEST_DURATION", "24h")
    ebb = Path(sys.executable).parent / "ebb"
    args = [str(ebb), "backtest", "-f", str(REPO / "examples/cluster.yaml"), "--start", START,
            "--trace", "batch-bursts", "--policy", str(REPO / "examples/backtest/churn-control.yaml"),
            "--duration", duration, "-o", "json"]
    started = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"ebb backtest failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout)
    return {"duration": duration, "duration_seconds": result["duration_seconds"], "wall_seconds": wall,
            "jobs": default_jobs(),
            "load_average": os.getloadavg()[0],
            "policies": [{"name": p["name"], "summary": p["summary"]} for p in result["policies"]]}


def render(r: dict[str, Any]) -> list[str]:
    simulated = r["duration_seconds"] * len(r["policies"])
    lines = [f"### Back-test: `batch-bursts` on the 300-node example, {r['duration']} simulated per policy", "",
             f"{len(r['policies'])} policies, {r['wall_seconds']:.1f} s wall ({r['jobs']} jobs), "
             f"{simulated / r['wall_seconds']:.0f} simulated seconds per wall second; load average "
             f"{r['load_average']:.2f}. The target: a simulated day with two policies in 60 s.", "",
             "| policy | node-hours $ | launches | disruptions | evictions | planner passes |",
             "|---|---:|---:|---:|---:|---:|"]
    for p in r["policies"]:
        s = p["summary"]
        lines.append(f"| {p['name']} | {s['node_hours_cost']:.2f} | {s['launches']} | "
                     f"{sum(s['disruptions'].values())} | {s['evictions']} | {s.get('planner_passes', '')} |")
    return [*lines, ""]
