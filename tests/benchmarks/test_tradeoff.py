"""The pure half of the trade-off sweep (bench/tradeoff.py): the settings of each side and the policies they make,
the back-test's setup of a peer trace, a point's figures, the Pareto frontiers, the goal against Karpenter's
frontier and the results section. The sweep itself is a benchmark (``python -m bench tradeoff``); its smoke runs in
tests/benchmarks/test_tradeoff_smoke.py."""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import calibrate, peer, tradeoff  # noqa: E402
from bench.__main__ import write_results  # noqa: E402

from ebb.core.traces import Trace  # noqa: E402
from ebb_embedded.backtest import karpenter_balanced, karpenter_default  # noqa: E402
from tests.kit.kwok_types import TYPES  # noqa: E402

# -- the settings -----------------------------------------------------------------------------------------------------


def test_each_side_sweeps_at_least_ten_settings_with_distinct_names() -> None:
    karpenter, ebb = tradeoff.karpenter_settings(), tradeoff.ebb_settings()
    assert len(karpenter) >= 10 and len(ebb) >= 10
    for side in (karpenter, ebb):
        assert len({s.name for s in side}) == len(side)
    # Karpenter's: every combination of consolidationPolicy, consolidateAfter and budget
    combos = {(s.spec["consolidationPolicy"], s.spec["consolidateAfter"], s.spec["budget"]) for s in karpenter}
    assert combos == set(itertools.product(*tradeoff.KARPENTER_GRID))
    # the named settings are all in the sweep
    assert set(tradeoff.NAMED) <= {s.name for s in karpenter + ebb}


def test_a_karpenter_setting_is_the_built_in_simulation_with_other_nodepool_disruption_settings() -> None:
    for setting in tradeoff.karpenter_settings():
        policy = tradeoff.karpenter_policy(setting)
        base = karpenter_balanced() if setting.spec["consolidationPolicy"] == "Balanced" else karpenter_default()
        assert policy.engine_options == base.engine_options == {"karpenterPace": "true"}
        (doc,), (base_doc,) = policy.documents, base.documents
        assert doc["metadata"] == base_doc["metadata"]
        assert doc["spec"] == {**base_doc["spec"], "consolidateAfter": setting.spec["consolidateAfter"],
                               "budgets": [{"nodes": setting.spec["budget"]}]}
        assert doc["spec"]["minimumSavingPerEvictedPod"] == 0  # Karpenter's rule: any saving for any eviction


def test_the_built_ins_are_points_of_the_karpenter_grid() -> None:
    default = tradeoff.karpenter_policy(tradeoff.karpenter_setting("WhenEmptyOrUnderutilized", "0s", "10%"))
    balanced = tradeoff.karpenter_policy(tradeoff.karpenter_setting("Balanced", "0s", "10%"))
    assert default.documents == karpenter_default().documents
    assert balanced.documents == karpenter_balanced().documents


def test_an_ebb_setting_is_a_disruption_policy_at_ebbs_pace_with_only_the_windows_it_sets() -> None:
    setting = tradeoff.ebb_setting("1m", 20, "", 0.02)
    policy = tradeoff.ebb_policy(setting)
    assert not policy.engine_options
    (doc,) = policy.documents
    assert doc["kind"] == "DisruptionPolicy" and doc["metadata"]["name"] == "*"
    assert doc["spec"] == {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s",
                           "budgets": [{"nodes": "10%"}], "stabilizationWindow": "1m",
                           "minimumPriceImprovementPercent": 20, "minimumSavingPerEvictedPod": 0.02}


def test_the_recommended_policy_is_the_peer_sides() -> None:
    recommended = next(s for s in tradeoff.ebb_settings() if s.name == "recommended")
    side = peer.SIDES["ebb-recommended"]
    spec = tradeoff.ebb_policy(recommended).documents[0]["spec"]
    assert (spec["consolidateAfter"], spec["stabilizationWindow"], spec["minimumPriceImprovementPercent"],
            spec["demandWindow"], spec["budgets"]) == (side.consolidate_after, side.stabilization_window,
                                                      side.minimum_price_improvement_percent, side.demand_window,
                                                      [{"nodes": side.budget}])


# -- the back-test's setup ----------------------------------------------------------------------------------------


def test_a_trace_is_set_up_as_the_calibration_sets_up_a_real_runs_back_test() -> None:
    cloud = peer.CLOUD
    su = tradeoff.setup("bursty", 2, peer.SMOKE, TYPES, cloud)
    trace = peer.make_trace(2, peer.SMOKE, "bursty")
    low, high = cloud.node_ready
    # the cloud's boot range with KWOK's own second or two, and its spot-to-spot
    assert (su.options.boot_seconds, su.options.boot_seconds_max) == (
        low + calibrate.KWOK_READY_SECONDS, high + calibrate.KWOK_READY_SECONDS)
    assert su.options.spot_to_spot == cloud.spot_to_spot and su.options.seed == 2
    # the services come once the slowest starting node is Ready; the scale up is over once every pod was created
    # at the controller's rate and ran UP_SETTLED seconds; the run lasts as long as the shifted trace
    services_at = high + calibrate.KWOK_READY_SECONDS
    pods, _, _ = trace.peak_requests()
    assert su.up_end == services_at + math.ceil(pods / calibrate.CREATION_RATE) + peer.UP_SETTLED
    assert su.options.duration.total_seconds() == trace.shifted(su.up_end).bursty.end
    events = Trace.model_validate(su.trace).ordered()
    assert min(e.at for e in events) == services_at
    # the starting cluster: the NodePool with the cloud's capacity types, the catalog, the planned nodes as Ready Nodes
    nodes = [d for d in su.documents if d["kind"] == "Node"]
    pool = peer.nodepool("0s", "0", capacity_types=cloud.capacity_types)
    assert len(nodes) == len(peer.starting_cluster(trace, TYPES, pool)) > 0
    assert su.documents[0]["spec"]["template"]["spec"]["requirements"][2]["values"] == list(cloud.capacity_types)
    # the scale up alone: the same run cut where the disruption starts
    assert tradeoff.prefix(su).duration.total_seconds() == su.up_end


def test_a_points_figures_are_the_side_by_sides_headline_figures() -> None:
    summary = {"node_hours_cost": 1.25, "launches": 7, "nodes_disrupted": 9, "evictions": 31,
               "pods_evicted_more_than_once": 2, "pending_pod_seconds": 420.5,
               "disruptions": {"emptiness": 4, "single-node-consolidation": 3}}
    f = tradeoff.figures(summary, prefix_cost=0.25)
    assert f["cost"] == 1.0 and f["cost_whole"] == 1.25
    assert f["churn"] == 16 and (f["launches"], f["deleted"]) == (7, 9)
    assert (f["evictions"], f["evicted_twice"], f["pending"]) == (31, 2, 420.5)


def test_a_cached_point_is_keyed_by_everything_the_back_test_depends_on() -> None:
    su = tradeoff.setup("bursty", 1, peer.SMOKE, TYPES)
    one, two = tradeoff.SMOKE.settings[:2]
    key = tradeoff.point_key(su, tradeoff.policy_of(one), su.options, "code")
    assert key == tradeoff.point_key(su, tradeoff.policy_of(one), su.options, "code")
    assert key != tradeoff.point_key(su, tradeoff.policy_of(two), su.options, "code")
    assert key != tradeoff.point_key(su, tradeoff.policy_of(one), tradeoff.prefix(su), "code")
    assert key != tradeoff.point_key(su, tradeoff.policy_of(one), su.options, "other code")
    other = tradeoff.setup("bursty", 2, peer.SMOKE, TYPES)
    assert key != tradeoff.point_key(other, tradeoff.policy_of(one), other.options, "code")


def test_the_code_fingerprint_changes_with_the_code(tmp_path: Path) -> None:
    source = tmp_path / "libs" / "ebb" / "src" / "ebb" / "core" / "x.py"
    source.parent.mkdir(parents=True)
    source.write_text("A = 1\n")
    before = tradeoff.code_fingerprint(tmp_path)
    source.write_text("A = 2\n")
    assert tradeoff.code_fingerprint(tmp_path) != before


# -- the frontiers and the goal ---------------------------------------------------------------------------------------


def dominates(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] <= b[0] and a[1] <= b[1] and a != b


@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20)), min_size=1, max_size=30))
def test_the_frontier_is_every_point_nothing_dominates(raw: list[tuple[int, int]]) -> None:
    points = [(float(x), float(y)) for x, y in raw]
    front = tradeoff.frontier(points)
    on = set(front)
    assert front == sorted(on, key=lambda i: (points[i], i))
    for i, p in enumerate(points):
        if i in on:
            assert not any(dominates(q, p) for q in points)
        else:
            assert any(dominates(points[j], p) for j in on)


def aggregate(name: str, side: tradeoff.SideName, per_seed: dict[int, dict[str, float]]) -> tradeoff.Aggregate:
    return tradeoff.Aggregate(tradeoff.Setting(side, name, {}), "bursty", per_seed)


def figs(cost: float, churn: float, evictions: float, pending: float) -> dict[str, float]:
    return {"cost": cost, "churn": churn, "evictions": evictions, "pending": pending}


def test_the_goal_is_met_only_within_every_limit_on_every_seed() -> None:
    karpenter = aggregate("k", "karpenter", {1: figs(1.0, 40, 50, 1000), 2: figs(2.0, 20, 10, 500)})
    within = aggregate("e", "ebb", {1: figs(1.02, 20, 50, 1000), 2: figs(1.5, 10, 0, 100)})
    assert all(past == 0.0 for _, past in tradeoff.shortfall(within, karpenter).values())
    # churn 0.6x on seed 2 only: 20% past the limit of half
    seed_two = aggregate("e2", "ebb", {1: figs(1.0, 20, 50, 1000), 2: figs(2.0, 12, 10, 500)})
    axes = tradeoff.shortfall(seed_two, karpenter)
    assert axes["churn"][0] == 0.6 and math.isclose(axes["churn"][1], 0.2)
    assert all(axes[a][1] == 0.0 for a in ("cost", "evictions", "pending"))
    # an eviction where Karpenter made none: no ratio, infinitely past
    none = aggregate("k0", "karpenter", {1: figs(1.0, 40, 0, 1000)})
    assert tradeoff.shortfall(aggregate("e3", "ebb", {1: figs(1.0, 10, 1, 10)}), none)["evictions"] == (None,
                                                                                                         math.inf)


@given(st.floats(0.01, 10), st.floats(0.01, 10), st.sampled_from(["cost", "churn", "evictions", "pending"]))
def test_the_goals_limits_are_the_side_by_sides(mine: float, theirs: float, axis: str) -> None:
    met = {key: check for key, _, check in peer.GOAL}[axis]
    e = aggregate("e", "ebb", {1: {**figs(1, 1, 1, 1), axis: mine}})
    k = aggregate("k", "karpenter", {1: {**figs(1, 1, 1, 1), axis: theirs}})
    past = tradeoff.shortfall(e, k)[axis][1]
    assert (past == 0.0) == met(mine, theirs) or math.isclose(mine, theirs * tradeoff.GOAL_LIMITS[axis])


def test_the_goal_is_checked_against_every_karpenter_setting_on_either_frontier() -> None:
    karpenter = [aggregate("cheap", "karpenter", {1: figs(1.0, 40, 50, 100)}),
                 aggregate("calm", "karpenter", {1: figs(1.5, 10, 60, 100)}),
                 aggregate("gentle", "karpenter", {1: figs(1.6, 30, 5, 100)}),
                 aggregate("worse", "karpenter", {1: figs(1.7, 41, 70, 100)})]
    ebb = [aggregate("meets-cheap", "ebb", {1: figs(1.01, 20, 50, 90)}),
           aggregate("close", "ebb", {1: figs(1.5, 6, 70, 100)}),
           aggregate("pricey", "ebb", {1: figs(3.0, 1, 1, 1)})]
    matches = tradeoff.goal_check(karpenter, ebb)
    assert [m.karpenter.setting.name for m in matches] == ["cheap", "calm", "gentle"]  # "worse" is on no frontier
    by = {m.karpenter.setting.name: m for m in matches}
    assert by["cheap"].met and by["cheap"].ebb.setting.name == "meets-cheap"
    assert not by["calm"].met and by["calm"].ebb.setting.name == "close"  # evictions 70 > 60: 17% past
    assert math.isclose(by["calm"].axes["evictions"][1], 70 / 60 - 1)


def test_figures_relative_to_karpenters_defaults_on_the_same_trace_and_seed() -> None:
    points = [{"side": "karpenter", "setting": tradeoff.BASELINE, "trace": "bursty", "seed": 1,
               "figures": figs(2.0, 40, 0, 100)},
              {"side": "ebb", "setting": "e", "trace": "bursty", "seed": 1, "figures": figs(1.0, 10, 5, 50)},
              {"side": "ebb", "setting": "e", "trace": "bursty", "seed": 2, "figures": figs(1.0, 10, 5, 50)}]
    rel = tradeoff.relative(points)
    assert rel[0]["figures"] == figs(1.0, 1.0, 0.0, 1.0)
    assert rel[1]["figures"] == figs(0.5, 0.25, 5.0, 0.5)  # no eviction in the baseline: divided by 1
    assert rel[2]["figures"] == points[2]["figures"]  # no baseline on seed 2: as it was
    # the goal's ratios per seed do not change
    k = tradeoff.aggregate(rel, [tradeoff.Setting("karpenter", tradeoff.BASELINE, {})], "bursty")[0]
    e = tradeoff.aggregate(rel, [tradeoff.Setting("ebb", "e", {})], "bursty")[0]
    assert tradeoff.shortfall(e, k)["cost"][0] == 0.5


# -- the section -----------------------------------------------------------------------------------------------------


def points_for(settings: list[tradeoff.Setting]) -> list[dict[str, Any]]:
    return [{"side": s.side, "setting": s.name, "trace": trace, "seed": seed,
             "figures": figs(1.0 + n / 10 + seed / 100, 40 - n + seed, 30 + (n * 7) % 11, 500 + n)}
            for n, s in enumerate(settings) for trace in ("bursty", "diurnal") for seed in (1, 2)]


META = {"seeds": [1, 2], "traces": ["bursty", "diurnal"], "size": "short", "jobs": 2, "points": 20, "cached": 4,
        "minutes": 1.5, "run_minutes": 1.2, "cpu_minutes": 2.0,
        "worker_minutes": 3.0}


def test_the_section_has_the_picture_the_frontiers_and_a_goal_row_per_karpenter_frontier_setting() -> None:
    settings = list(tradeoff.SMOKE.settings)
    points = points_for(settings)
    lines = tradeoff.render(points, settings, META)
    text = "\n".join(lines)
    assert lines[0].startswith("### Trade-off: cost against churn and evictions (2 Karpenter and 2 ebb settings")
    assert "](img/tradeoff.png)" in text
    rows = [line for line in lines if line.startswith(("| bursty |", "| diurnal |"))]
    karpenter = [s for s in settings if s.side == "karpenter"]
    expected = sum(len(tradeoff.frontier_settings(points, karpenter, t)) for t in ("bursty", "diurnal"))
    assert len(rows) == expected == sum(len(tradeoff.goal_matches(points, settings, t)) for t in ("bursty",
                                                                                                   "diurnal")) > 0


def test_the_section_is_written_into_the_results_block_and_replaced_by_the_next_run() -> None:
    page = "# Benchmarks\n\n## Results\n\n<!-- bench:results -->\n\n### Memory: x\n\nold\n\n<!-- /bench:results -->\n"
    settings = list(tradeoff.SMOKE.settings)
    first = "\n".join(["Machine: a", "", *tradeoff.render(points_for(settings), settings, META)])
    once = write_results(page, first)
    twice = write_results(once, first.replace("Machine: a", "Machine: b"))
    assert twice.count("### Trade-off: cost against churn and evictions") == 1
    assert "Machine: b" in twice and "Machine: a" not in twice and "### Memory: x" in twice


def test_the_picture_is_drawn_with_both_sides_on_every_trace(tmp_path: Path) -> None:
    settings = list(tradeoff.SMOKE.settings)
    path = tmp_path / "img" / "tradeoff.png"
    tradeoff.draw(points_for(settings), settings, META, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from PIL import Image

    with Image.open(path) as image:
        width, height = image.size
    assert width > 1000 and height > 1000  # two rows (traces) of two panels
