"""``python -m bench load`` shrunk to a smoke (``EBB_BENCH_LOAD=100,1000,1,1,3``: 100 nodes, 1,000 pods, one node
emptied alone and a wave of three), so the load benchmark cannot rot: synthetic watch events through the
cluster-watcher's watch loop, a real Kafka, the consolidation-planner's process on PostgreSQL, the benchmark's
stand-in for the executor, and the planner's two restarts.

Asserted on what it reports, never on timings: every object reached the planner, the settled passes were answered
from the last one, every emptied node got an approved command, the stand-in ended each command's decision (so no
approved command is left holding its pods' room), each restarted planner commanded the node emptied while it was
down, and every measured pass has its CPU time. The servers are the session's when ``.infra/env.json`` names them,
else the benchmark starts its own.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.integration

#: the smoke takes about a minute; far beyond this it hangs
TIMEOUT = 600


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EBB_BENCH_LOAD")}
    env["EBB_BENCH_LOAD"] = "100,1000,1,1,3"
    run = subprocess.run([sys.executable, "-m", "bench", "_case", "load"], cwd=REPO, env=env,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert run.returncode == 0, run.stderr[-4000:]
    result: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    return result


def test_every_object_reaches_the_planner_and_the_settled_cluster_is_answered_from_the_last_pass(
        report: dict[str, Any]) -> None:
    assert report["nodes"] == 100 and report["pods"] == 1000
    assert report["ingest"]["events"] == report["events"] - 1  # the warm-up object went first
    assert report["steady_commands"] == []
    settled = report["settled"]
    assert settled["passes"]["n"] == 3 and settled["reused"] == 3


def test_every_emptied_node_gets_a_command_and_the_stand_in_ends_each(report: dict[str, Any]) -> None:
    assert report["timeouts"] == []
    assert report["latency_all"]["total"]["n"] == 4  # one alone, a wave of three
    assert report["commands"] >= 1
    assert report["stand_in"]["ended"] == report["stand_in"]["commands"] >= report["commands"] + 2  # + restarts'
    assert report["planner"]["approved"] >= report["commands"]  # (read back from the topic: approved before)


def test_each_restarted_planner_commands_the_node_emptied_while_it_was_down(report: dict[str, Any]) -> None:
    for key in ("restart", "restart_kill"):
        figures = report[key]
        assert math.isfinite(figures["to_command"]), figures
        assert figures["to_seeded"] <= figures["to_first_pass"] <= figures["to_command"]


def test_every_measured_pass_has_its_cpu_time(report: dict[str, Any]) -> None:
    passes = report["passes"]
    assert passes["steady_cpu"]["n"] == passes["steady"]["n"] > 0
    assert all(math.isfinite(passes["steady_cpu"][q]) and passes["steady_cpu"][q] >= 0 for q in ("p50", "max"))
