"""``python -m bench simpeer``: reading Karpenter's benchmark output, the Results section, the skip without Go, and a
smoke of both sides on one small size (skipped where Go or Karpenter's module is missing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import simpeer  # noqa: E402
from bench.__main__ import merge_results  # noqa: E402

GO_OUTPUT = """goos: linux
goarch: amd64
pkg: sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling
cpu: AMD EPYC
BenchmarkScheduling100-2   \t       1\t  61234567 ns/op\t        20.00 nodes\t       100.0 pods\t      1633 pods/sec
BenchmarkScheduling1000-2  \t       1\t 812345678 ns/op\t       200.0 nodes\t      1000 pods\t      1231 pods/sec
PASS
ok  \tsigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling\t3.104s
"""


def test_parse_benchmark_reads_the_line_of_the_size_asked() -> None:
    hundred = simpeer.parse_benchmark(GO_OUTPUT, 100)
    assert hundred == {"pods": 100, "seconds": pytest.approx(0.061234567), "pods_per_second": 1633.0,
                       "nodes": 20, "pods_scheduled": 100}
    assert simpeer.parse_benchmark(GO_OUTPUT, 1000)["nodes"] == 200
    with pytest.raises(ValueError, match="BenchmarkScheduling5000"):
        simpeer.parse_benchmark(GO_OUTPUT, 5000)
    with pytest.raises(ValueError):  # a line without the nodes metric is no result
        simpeer.parse_benchmark("BenchmarkScheduling100-2 1 5 ns/op\n", 100)


def _run(n: int, round_no: int, ebb_s: float, go_s: float, nodes: int) -> dict[str, Any]:
    return {"round": round_no, "pods": n, "ebb": {"seconds": ebb_s, "cpu_seconds": ebb_s / 2, "nodes": nodes},
            "karpenter": {"seconds": go_s, "cpu_seconds": go_s, "nodes": nodes + 1}}


def test_render_gives_each_sides_times_the_ratio_range_and_nodes() -> None:
    result = {"karpenter_version": "v1.14.1", "sizes": [1000], "rounds": 2, "build_seconds": 3.0,
              "load_before": [1.0, 2.0, 3.0], "load_after": [1.5, 2.0, 3.0],
              "runs": [_run(1000, 1, 0.1, 3.0, 200), _run(1000, 2, 0.2, 4.0, 200)]}
    lines = simpeer.render(result)
    assert lines[0].startswith("### Scheduling simulator beside Karpenter's BenchmarkScheduling (2 interleaved")
    (row,) = (line for line in lines if line.startswith("| 1,000 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells == ["1,000", "0.100, 0.200", "3.000, 4.000", "20.0 to 30.0", "5,000 to 10,000", "250 to 333",
                     "200", "201", "0.050, 0.100", "3.000, 4.000", "40.0 to 60.0"]
    assert "before 1.0, 2.0, 3.0" in "\n".join(lines)


def test_without_go_the_case_is_skipped_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(simpeer, "go_binary", lambda: None)
    ran: list[int] = []

    def ebb_case(n: int) -> dict[str, Any]:
        ran.append(n)
        return {}

    result = simpeer.run_rounds(ebb_case, sizes=(100,), rounds=1, log=lambda _: None)
    assert ran == [] and "Go is not installed" in result["skipped"]
    lines = simpeer.render(result)
    assert lines[0] == "### Scheduling simulator beside Karpenter's BenchmarkScheduling"
    assert lines[2].startswith("Skipped: Go is not installed")
    # a skipped run replaces the section of an earlier run of the same title, as every section is
    old = "### Scheduling simulator beside Karpenter's BenchmarkScheduling (2 interleaved rounds)\n\nold table\n"
    assert "old table" not in merge_results(old, "\n".join(["Machine: m", "", *lines]))


def test_without_karpenters_module_the_case_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(simpeer, "karpenter_module", lambda go: None)
    monkeypatch.setattr(simpeer, "go_binary", lambda: "/usr/bin/go")
    assert "not in the Go module cache" in simpeer.run_rounds(lambda n: {}, sizes=(100,), rounds=1)["skipped"]


def _ebb_case(n: int) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "bench", "_case", "simulator", str(n)], cwd=REPO_ROOT,
                         capture_output=True, text=True, check=True, env={**os.environ, "PYTHONHASHSEED": "0"})
    value: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return value


@pytest.mark.skipif(simpeer.unavailable() is not None, reason=str(simpeer.unavailable()))
def test_smoke_both_sides_schedule_100_pods() -> None:
    """Both sides run on one small size and launch nodes for every pod; no timing is asserted."""
    result = simpeer.run_rounds(_ebb_case, sizes=(100,), rounds=1, log=lambda _: None)
    assert "skipped" not in result, result.get("skipped")
    (run,) = result["runs"]
    assert run["ebb"]["unplaced"] == 0 and run["karpenter"]["pods_scheduled"] == 100
    # 20 anti-affinity pods need a node each, on both sides
    assert run["ebb"]["nodes"] >= 20 and run["karpenter"]["nodes"] >= 20
    assert run["ebb"]["seconds"] > 0 and run["karpenter"]["seconds"] > 0
    assert run["ebb"]["cpu_seconds"] > 0 and run["karpenter"]["cpu_seconds"] > 0
    assert any(line.startswith("| 100 |") for line in simpeer.render(result))
