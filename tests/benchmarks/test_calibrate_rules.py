"""The back-test's ``karpenter-default`` keeps Karpenter's rules (sigs.k8s.io/karpenter v1.14,
pkg/controllers/disruption): a converted peer trace, short and deterministic, whose decisions are asserted against
what the rules give, not against an earlier run:

- the budget: ``nodes: 10%`` allows ceil(10% of the NodePool's nodes) disrupting at once (Karpenter rounds a
  percentage up, ``GetAllowedDisruptionsByReason``), and emptiness deletes every empty candidate the budget allows
  in one command;
- the validation: a command is executed ``commandValidationDelay`` (15 s) after it was computed, and the
  disruption loop waits for it, so two commands are at least 15 s apart; after a command it looks again at once;
- the poll: with nothing to do the loop looks again every 10 s, not on a change, so the first command after the
  workload shrinks comes 15-26 s later (the 10 s poll, the validation, a second of batching), and its nodes go 5 s
  after their taint at the earliest (the termination's ``MinDrainTime``);
- the look right after a command counts the nodes it is deleting against the budget (``StartCommand`` marks them
  for deletion before the loop looks again, ``BuildDisruptionBudgetMapping`` subtracts them): here every command
  takes the whole budget, so that look finds nothing and the next command comes after the poll, 25-27 s on;
- where the pods land: the simulated kube-scheduler scores nodes as kube-scheduler's default profile does, so a
  service's replicas spread over equal nodes and leave none empty, where packing them would.

The calibration against the real Karpenter (``python -m bench calibrate``, docs/backtest.md) measured the same
cadence there: commands 15.5-16 s apart when the look right after one finds the next, 25-31 s when it waits out the
poll."""

from __future__ import annotations

import itertools
import math
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import calibrate, peer  # noqa: E402

from ebb.core.traces import Trace  # noqa: E402
from tests.kit.kwok_types import TYPES  # noqa: E402

#: Karpenter's constants (pkg/controllers/disruption: controller.go ``pollingPeriod``, consolidation.go
#: ``commandValidationDelay``) and the NodePool's budget
POLL = 10.0
VALIDATION = 15.0
#: node/termination ``MinDrainTime``: a node is drained no sooner than this after its taint
MIN_DRAIN = 5.0
BUDGET = 0.10
PODS = 20
SCALE_DOWN = 60.0


@pytest.fixture(scope="module")
def run() -> dict[str, Any]:
    """20 pods with hostname anti-affinity (a node each), scaled down to one at ``SCALE_DOWN``: 19 empty nodes for
    Karpenter's emptiness, sampled every simulated second."""
    from ebb_embedded.backtest import BacktestOptions, karpenter_default, run_policy

    service = peer.Service("svc-00-hostname", PODS, 1500, 1024, "hostname")
    phases = (peer.Phase("scale up", "up", 0.0, SCALE_DOWN, 1.0),
              peer.Phase("scale down", "down", SCALE_DOWN, 400.0, 1 / PODS),
              peer.Phase("tail", "bursty", 400.0, 420.0, 1 / PODS))
    trace = Trace.model_validate(calibrate.ebb_trace(peer.Trace(1, (service,), (), phases, 20.0)))
    options = BacktestOptions(start=calibrate.START, duration=timedelta(seconds=420), seed=1, sample_every=1.0,
                              boot_seconds=calibrate.KWOK_READY_SECONDS)
    documents = calibrate.starting_documents(peer.SIDES["karpenter-default"], TYPES)
    result: dict[str, Any] = run_policy(documents, trace, karpenter_default(), options)
    return result


def commands(run: dict[str, Any]) -> list[tuple[float, int, int]]:
    """(seconds after the start, nodes before, nodes deleted) of each moment nodes were deleted."""
    series = run["series"]
    return [(float(i), series[i - 1]["nodes"], s["disruptions"]) for i, s in enumerate(series) if s["disruptions"]]


def test_one_node_per_pod_is_launched_and_every_empty_one_deleted_by_emptiness_without_an_eviction(
        run: dict[str, Any]) -> None:
    summary = run["summary"]
    assert summary["launches"] == PODS
    assert summary["nodes_disrupted"] == PODS - 1 and run["series"][-1]["nodes"] == 1
    assert set(summary["disruptions"]) == {"emptiness"} and summary["evictions"] == 0


def test_each_command_deletes_what_the_ten_percent_budget_allows_rounded_up(run: dict[str, Any]) -> None:
    expected: list[int] = []
    nodes = PODS
    while nodes > 1:
        n = min(math.ceil(BUDGET * nodes), nodes - 1)
        expected.append(n)
        nodes -= n
    assert [deleted for _, _, deleted in commands(run)] == expected
    assert all(deleted == min(math.ceil(BUDGET * before), before - 1) for _, before, deleted in commands(run))
    assert sum(expected) == PODS - 1 and len(run["summary"]["disruptions"]) == 1
    assert run["summary"]["disruptions"]["emptiness"] == len(expected)


def test_the_first_command_waits_for_the_poll_and_the_validation(run: dict[str, Any]) -> None:
    first, _, _ = commands(run)[0]  # when its nodes went: the drain's minimum after the command's taint
    assert SCALE_DOWN + VALIDATION + MIN_DRAIN <= first <= SCALE_DOWN + POLL + VALIDATION + MIN_DRAIN + 1


def test_a_command_that_takes_the_whole_budget_is_followed_by_the_next_after_the_poll(run: dict[str, Any]) -> None:
    moments = [t for t, _, _ in commands(run)]
    gaps = [b - a for a, b in itertools.pairwise(moments)]
    assert gaps and all(POLL + VALIDATION <= gap <= POLL + VALIDATION + 2 for gap in gaps), gaps


@pytest.mark.parametrize(("binding", "left_empty"), [("scored", False), ("first-fit", True)])
def test_kube_scheduler_spreads_a_services_pods_over_the_starting_nodes(binding: str, left_empty: bool) -> None:
    """kube-scheduler's default scoring (LeastAllocated, the default spreading over hosts and zones) spreads a
    service's replicas over the starting cluster's equal nodes, so none is left empty for Karpenter's emptiness;
    packing them onto the first nodes that fit (the engine's own simulation, ``first-fit``) leaves some empty. The
    disruption is held until every pod is bound, as the calibration holds it until the real run's began."""
    from ebb_embedded.backtest import BacktestOptions, karpenter_default, run_policy

    service = peer.Service("svc-08-none", 8, 500, 512, "none")
    phases = (peer.Phase("scale up", "up", 0.0, 30.0, 1.0), peer.Phase("tail", "bursty", 30.0, 120.0, 1.0))
    trace = Trace.model_validate(calibrate.ebb_trace(peer.Trace(1, (service,), (), phases, 90.0)))
    nodes = [peer.StartNode(f"{peer.START_PREFIX}{i:03d}", "c-4x-amd64-linux", "on-demand", peer.ZONES[i % 2])
             for i in range(4)]
    documents = calibrate.starting_documents(peer.SIDES["karpenter-default"], TYPES, nodes)
    options = BacktestOptions(start=calibrate.START, duration=timedelta(seconds=120), seed=1,
                              boot_seconds=calibrate.KWOK_READY_SECONDS, binding=binding)
    result = run_policy(documents, trace, calibrate.held_until(karpenter_default(), 30.0), options)
    summary = result["summary"]
    assert summary["pending_pods_at_end"] == 0 and not summary["launches_by"].get("provisioner")
    assert (summary["disruptions"].get("emptiness", 0) > 0) is left_empty
