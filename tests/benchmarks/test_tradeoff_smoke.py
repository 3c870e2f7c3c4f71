"""``python -m bench tradeoff --smoke``, so the sweep cannot rot: two settings a side on one seed of a short trace, in
worker processes, through the back-test; every point carries every axis, the frontiers it reports are each side's
non-dominated settings, the picture is a PNG, the section has a goal row per Karpenter frontier setting, and a second
run takes every point from the cache with the same figures. Karpenter's KWOK instance types come from the Go module
cache where they are, else from the tests' kit (``EBB_BENCH_TRADEOFF_TYPES``)."""

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

from bench import peer, tradeoff  # noqa: E402

from tests.kit.kwok_types import TYPES  # noqa: E402


def _types_env(tmp_path: Path) -> dict[str, str]:
    try:
        if peer.kwok_instance_types_path().exists():
            return {}
    except (OSError, subprocess.CalledProcessError):
        pass
    path = tmp_path / "instance_types.json"
    path.write_text(json.dumps(TYPES))
    return {"EBB_BENCH_TRADEOFF_TYPES": str(path)}


def _smoke(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bench", "tradeoff", "--smoke", *args], capture_output=True,
                          text=True, cwd=REPO_ROOT, env={**os.environ, **env}, timeout=300, check=False)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("tradeoff")
    env = {"EBB_BENCH_TRADEOFF_OUT": str(out), "EBB_BENCH_TRADEOFF_FRESH": "", **_types_env(out)}
    first = _smoke(env)
    assert first.returncode == 0, first.stderr[-3000:]
    result = json.loads((out / "tradeoff-smoke.json").read_text())
    again = _smoke(env)
    assert again.returncode == 0, again.stderr[-3000:]
    return {"out": out, "first": first, "result": result, "again": again,
            "again_result": json.loads((out / "tradeoff-smoke.json").read_text())}


def test_every_point_carries_every_axis(smoke: dict[str, Any]) -> None:
    result = smoke["result"]
    settings = {(s["side"], s["name"]) for s in result["settings"]}
    assert {s for s, _ in settings} == {"karpenter", "ebb"}
    assert {(p["side"], p["setting"]) for p in result["points"]} == settings
    for point in result["points"]:
        for axis, _ in tradeoff.AXES:
            assert isinstance(point["figures"][axis], int | float) and point["figures"][axis] >= 0
        assert point["figures"]["cost"] > 0 and point["figures"]["cost_whole"] > point["figures"]["cost"]
    # the trace scales the services down: somebody disrupts something
    assert any(p["figures"]["deleted"] > 0 for p in result["points"])


def test_the_frontiers_are_each_sides_non_dominated_settings(smoke: dict[str, Any]) -> None:
    result = smoke["result"]
    for trace, sides in result["frontiers"].items():
        for side, by_axis in sides.items():
            mine = {p["setting"]: p["figures"] for p in result["points"] if p["trace"] == trace and p["side"] == side}
            for axis, names in by_axis.items():
                assert names
                for name, f in mine.items():
                    dominated = any(g["cost"] <= f["cost"] and g[axis] <= f[axis]
                                    and (g["cost"] < f["cost"] or g[axis] < f[axis]) for g in mine.values())
                    assert (name in names) == (not dominated)


def test_the_picture_is_written_and_the_section_checks_the_goal(smoke: dict[str, Any]) -> None:
    image = Path(smoke["result"]["image"])
    assert image.parent == smoke["out"]  # a smoke never writes into docs/
    assert image.stat().st_size > 10_000 and image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    stdout = smoke["first"].stdout
    assert "### Trade-off: cost against churn and evictions" in stdout
    frontier = set().union(*smoke["result"]["frontiers"]["bursty"]["karpenter"].values())
    goal_rows = [line for line in stdout.splitlines() if line.startswith("| bursty |")]
    assert len(goal_rows) == len(frontier) == len(smoke["result"]["goal"])


def test_a_second_run_takes_every_point_from_the_cache(smoke: dict[str, Any]) -> None:
    first, again = smoke["result"], smoke["again_result"]
    assert again["meta"]["cached"] == again["meta"]["points"] == first["meta"]["points"]
    assert "0 to run" in smoke["again"].stderr
    assert [p["figures"] for p in again["points"]] == [p["figures"] for p in first["points"]]


def test_a_smoke_is_never_written_to_a_page(tmp_path: Path) -> None:
    refused = _smoke({"EBB_BENCH_TRADEOFF_OUT": str(tmp_path)}, "--write", str(tmp_path / "page.md"))
    assert refused.returncode != 0 and "never written to a page" in refused.stderr
    assert not (tmp_path / "page.md").exists()
