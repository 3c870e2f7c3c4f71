"""`python -m bench chaos`: the chaos run at length (10 minutes of chaos on 40 KWOK nodes by default;
``EBB_CHAOS_MINUTES``, ``EBB_CHAOS_NODES``, ``EBB_CHAOS_SEED``). It is the same run as the short one in ``make test``
(tests/integration/test_chaos.py, whose harness tests/kit/chaos.py has the invariants), run through pytest so
that it gets the same servers from the same fixtures; its report (a JSON file) becomes the "Chaos run" table of
docs/benchmarks.md's Results. Not part of ``all``: with the servers' start and the settling it takes about 20
minutes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def case_chaos() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ebb-bench-chaos-") as tmp:
        report = Path(tmp) / "report.json"
        env = {**os.environ, "EBB_CHAOS_MINUTES": os.environ.get("EBB_CHAOS_MINUTES", "10"),
               "EBB_CHAOS_NODES": os.environ.get("EBB_CHAOS_NODES", "40"), "EBB_CHAOS_REPORT": str(report)}
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:randomly",
                               "tests/integration/test_chaos.py"], cwd=REPO, env=env, check=False,
                              stdout=sys.stderr)
        wall = time.perf_counter() - started
        if not report.exists():
            raise SystemExit(f"the chaos run ended (pytest exit {done.returncode}) without a report")
        result: dict[str, Any] = json.loads(report.read_text())
    result["wall_seconds"] = wall
    result["pytest_exit"] = done.returncode
    result["load_average"] = os.getloadavg()[0]
    return result


def render(r: dict[str, Any]) -> list[str]:
    """The report's own table (``ChaosReport.markdown``) under a heading, with the run's wall time and load."""
    plan = r["plan"]
    return [f"### Chaos run ({plan['minutes']:g} minutes, {plan['nodes']} nodes, seed {plan['seed']})", "",
            f"{r['wall_seconds'] / 60:.1f} minutes in all with the servers' start; load average "
            f"{r['load_average']:.2f}; pytest exit {r['pytest_exit']}.", "", r["markdown"]]
