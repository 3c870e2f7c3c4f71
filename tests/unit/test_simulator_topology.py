"""The topology rules over a simulation's counts (`ebb.core.simulator.topology`): a spread's skew against its
least-loaded eligible domain, required pod affinity and anti-affinity, and a bin's domain codes. The scheduler's
tests place pods through them; these read the rules on counts given directly."""

from __future__ import annotations

import numpy as np

from ebb.core.model import LABEL_HOSTNAME, LABEL_ZONE
from ebb.core.simulator.constraints import Constraint
from ebb.core.simulator.labeltable import LabelTable
from ebb.core.simulator.topology import Topology


def _topology(n_nodes: int = 4) -> Topology:
    """Four nodes over two zones (a, b, a, b), no NodePool; room for two claims after them."""
    labels = [{LABEL_HOSTNAME: f"n{i}", LABEL_ZONE: "ab"[i % 2]} for i in range(n_nodes)]
    return Topology(n_nodes, n_nodes + 2, LabelTable(labels), {}, [])


def _ints(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def test_a_zone_spread_admits_a_domain_while_it_stays_within_max_skew_of_the_least_loaded() -> None:
    topology = _topology()
    topology.build_domains(LABEL_ZONE)
    spread = Constraint("spread", 0, LABEL_ZONE, max_skew=1, self_match=1, eligible=_ints(0, 1))
    counts = _ints(2, 1)  # zone a holds two, zone b one
    assert topology.global_min(spread, counts, 4, set()) == 1
    assert topology.condition(spread, counts, counts, 4, set()).tolist() == [False, True]
    # fewer eligible domains than minDomains: the minimum counts as zero, so zone b (one pod, two with this one)
    # is past the skew too
    short = Constraint("spread", 0, LABEL_ZONE, max_skew=1, self_match=1, min_domains=3, eligible=_ints(0, 1))
    assert topology.global_min(short, counts, 4, set()) == 0
    assert topology.condition(short, counts, counts, 4, set()).tolist() == [False, False]


def test_a_hostname_spread_leaves_out_removed_nodes_and_counts_the_claims_opened() -> None:
    topology = _topology()
    spread = Constraint("spread", 0, LABEL_HOSTNAME, max_skew=1, self_match=1, eligible=_ints(0, 1, 2, 3))
    counts = _ints(0, 2, 1, 1, 3, 0)  # four nodes, then two claims
    assert topology.global_min(spread, counts, 4, set()) == 0  # node 0 holds none
    assert topology.global_min(spread, counts, 4, {0}) == 1  # node 0 was taken out
    assert topology.global_min(spread, counts, 5, {0}) == 1  # the first claim holds three
    assert topology.global_min(spread, counts, 6, {0}) == 0  # the second claim holds none
    # a pod that may launch a new node has an empty domain: the minimum is zero
    launching = Constraint("spread", 0, LABEL_HOSTNAME, max_skew=1, self_match=1, eligible=_ints(1), new_domain=True)
    assert topology.global_min(launching, counts, 4, {0}) == 0


def test_affinity_wants_a_matching_pod_in_the_domain_and_anti_affinity_wants_none() -> None:
    topology = _topology()
    affinity = Constraint("affinity", 0, LABEL_ZONE)
    anti = Constraint("anti", 0, LABEL_ZONE)
    counts = _ints(0, 3)
    assert topology.condition(affinity, counts, counts, 4, set()).tolist() == [False, True]
    assert topology.condition(anti, counts, counts, 4, set()).tolist() == [True, False]
    # a pod its own affinity term selects may go anywhere while no pod it selects runs yet
    first = Constraint("affinity", 0, LABEL_ZONE, self_match=1)
    nothing = _ints(0, 0)
    assert topology.condition(first, nothing, nothing, 4, set()).tolist() == [True, True]
    assert topology.condition(first, counts, counts, 4, set()).tolist() == [False, True]


def test_allowed_bins_reads_each_bins_domain_and_admits_a_claim_with_none_yet() -> None:
    topology = _topology()
    topology.build_domains(LABEL_ZONE)
    zone_codes = topology.domain_codes[LABEL_ZONE][1]
    bin_codes = {LABEL_ZONE: np.concatenate([zone_codes, _ints(-1, -1)])}  # the two claims: no zone decided yet
    anti = Constraint("anti", 0, LABEL_ZONE)
    counts = [np.zeros(len(topology.domain_codes[LABEL_ZONE][0]), dtype=np.int64)]
    counts[0][zone_codes[1]] = 1  # a pod the term selects runs in node 1's zone
    allowed = topology.allowed_bins([anti], bin_codes, counts, 6, set())
    assert allowed.tolist() == [True, False, True, False, True, True]
    affinity = Constraint("affinity", 0, LABEL_ZONE)
    allowed = topology.allowed_bins([affinity], bin_codes, counts, 6, set())
    assert allowed.tolist() == [False, True, False, True, True, True]
