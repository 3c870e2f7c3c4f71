"""``python -m bench scale`` (bench/scale.py) on a small cluster: each size's figures are measured, consistent with
one another (the planner's settled pass answered from the last one), and rendered into a row; the picture, where
matplotlib is installed, is a real PNG. The sizes the benchmark runs (500 to 10,000 nodes) belong in ``make bench``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.__main__ import NOW  # noqa: E402
from bench.scale import PODS_PER_NODE, SETTLED, case_scale, draw, render  # noqa: E402


def test_a_small_cluster_is_measured_and_rendered(tmp_path: Path) -> None:
    result = case_scale(60, NOW)
    assert result["nodes"] == 60 and result["pods"] == 60 * PODS_PER_NODE
    assert 0 < result["pass_seconds"] < result["pass_seconds"] + result["until_stable_seconds"]
    assert result["steps"] >= 2  # the generated cluster has work in it: at least one step and the quiet last pass
    assert result["cost_final"] < result["cost_before"]  # consolidation made it cheaper
    assert result["peak_rss_mib"] > 0
    # the planner's settled passes, the clock moving, are answered from the last one (PassInputs: the lifetime grid
    # holds the candidates' order), after a change it is computed again (the median of the passes after each of
    # `CHANGES` changes, and the slowest)
    assert result["settled_reused"] == result["settled_passes"] == SETTLED
    assert 0 < result["settled_seconds"] < result["changed_seconds"] <= result["changed_max_seconds"]
    assert result["changed_cpu_seconds"] > 0
    (row,) = [line for line in render([result]) if line.startswith("| 60 / 600 |")]
    assert f"{result['steps']} passes" in row and f"${result['cost_before']:,.2f}/h" in row


def test_the_picture_is_a_png_with_both_lines_when_matplotlib_is_there(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the picture needs the dev group's matplotlib")
    results = [{"nodes": n, "pods": 10 * n, "pass_seconds": n / 1000, "changed_seconds": n / 900,
                "settled_seconds": 0.001, "until_stable_seconds": 1.0, "steps": 3, "cost_before": 2.0,
                "cost_final": 1.0, "peak_rss_mib": 9.0}
               for n in (500, 1000, 2000)]
    path = tmp_path / "img" / "scale.png"
    assert draw(results, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
