"""Multi-node consolidation tries the merge: sets of candidates with at most one replacement, whatever the single
nodes could do on their own.

Karpenter's multi-node consolidation (v1.14.1, ``firstNConsolidationOption``) takes the candidates in disruption-cost
order, those the budgets allow, at most 100 (101 in its prefixes), and binary-searches the sizes of their prefixes,
from half of them, for the largest set that consolidates together into at most one new node. ebb's greedy search
grows a set only while each step saves more, so two $1.00 nodes whose pods fit together on one $1.50 node, neither
of which consolidates on its own, were left alone, and their explanations never said a merge was considered. The
merge search (`multi_node._merge`) tries the whole set first, then Karpenter's search; a set found is verified as
validation verifies it, counts against the budgets, and is taken when it saves more than the greedy set and than its
nodes one at a time (ebb's difference, docs/decisions.md). A node left alone says which merge was tried with it and
why it was refused.
"""

from __future__ import annotations

from typing import Any

import pytest

from ebb.core.methods.base import Command, EngineOptions
from ebb.core.plan import make_plan, plan_json
from ebb.core.validation import validate
from tests.kit.builders import (
    NOW,
    blocked_of,
    catalog,
    instance_type,
    node,
    nodepool,
    plan,
    plan_dict,
    pod,
    snapshot,
)

#: two instance types: "one" (2 cpu) at $1.00/h, "two" (4 cpu) at $1.50/h
PAIR = catalog([instance_type("one", "2", "8Gi", 29, 1.0), instance_type("two", "4", "16Gi", 58, 1.5)])
#: the same with "two" at $2.00/h: a merge saves nothing
DEAR = catalog([instance_type("one", "2", "8Gi", 29, 1.0), instance_type("two", "4", "16Gi", 58, 2.0)])
TRIED = "into at most one new node was considered too and refused: "


def _ones(cat: dict[str, Any], cpus: list[str], **pool: Any) -> list[Any]:
    """A NodePool and one node of type "one" per cpu request, each running one pod that requests it."""
    docs: list[Any] = [cat, nodepool(**pool)]
    for i, cpu in enumerate(cpus):
        name = "abcdefgh"[i]
        docs += [node(name, itype="one"), pod(f"p-{name}", name, cpu=cpu)]
    return docs


#: a and b ($0.10/h, 2 cpu) hold 1500m each, c ($0.06/h, 1 cpu) 900m: together they fit one s4 ($0.21/h, 4 cpu),
#: cheaper than the three ($0.26/h); no two of them fit a node cheaper than they cost, and none fits elsewhere alone
WHOLE_ONLY: list[Any] = [
    catalog([instance_type("s1", "1", "4Gi", 29, 0.06), instance_type("s2", "2", "8Gi", 29, 0.10),
             instance_type("s4", "4", "16Gi", 29, 0.21)]), nodepool(),
    node("a", itype="s2"), pod("p-a", "a", cpu="1500m"), node("b", itype="s2"), pod("p-b", "b", cpu="1500m"),
    node("c", itype="s1"), pod("p-c", "c", cpu="900m")]


# (id, documents, the commands as (method, action, nodes, the replacement's type), words of the commands'
#  explanations, the words each node left alone says)
CASES: list[tuple[str, list[Any], list[tuple[str, str, list[str], str]], list[str], dict[str, str]]] = [
    ("two $1.00 nodes whose pods fit together on one $1.50 node are merged", _ones(PAIR, ["1500m", "1500m"]),
     [("multi-node-consolidation", "replace", ["a", "b"], "two")],
     ["a merge of the first 2 of the 2 candidates the search considered", "none of its nodes consolidates on its own"],
     {}),
    ("the merged node costs as much: both kept, each says the merge was refused", _ones(DEAR, ["1500m", "1500m"]),
     [], [],
     {"a": TRIED + "can't replace with a cheaper node: its pods need a node costing $2.0000/h or more, and it costs "
           "$2.0000/h",
      "b": "a merge of the first 2 candidates, it included, " + TRIED}),
    ("their pods need a host each (one host port): both kept", [
        PAIR, nodepool(), node("a", itype="one"), pod("p-a", "a", cpu="1500m", host_port=8080),
        node("b", itype="one"), pod("p-b", "b", cpu="1500m", host_port=8080)], [], [],
     {"b": "a merge of the first 2 candidates, it included, " + TRIED + "its pods do not fit on the other nodes "
           "(pod default/p-"}),
    ("three pods too big for one node: the first two merged", _ones(PAIR, ["2000m", "2000m", "2000m"]),
     [("multi-node-consolidation", "replace", ["a", "b"], "two")], ["a merge of the first 2 of the 3 candidates"],
     {"c": "a merge of the first 3 candidates, it included, " + TRIED + "its pods do not fit on the other nodes "
           "(pod default/p-"}),
    ("the largest set first: three nodes onto one", _ones(PAIR, ["1300m", "1300m", "1300m"]),
     [("multi-node-consolidation", "replace", ["a", "b", "c"], "two")],
     ["a merge of the first 3 of the 3 candidates"], {}),
    ("the largest set does not fit, the largest prefix that does is taken", _ones(PAIR, ["1300m"] * 4),
     [("multi-node-consolidation", "replace", ["a", "b", "c"], "two")],
     ["a merge of the first 3 of the 4 candidates"],
     {"d": "a merge of the first 4 candidates, it included, " + TRIED + "its pods do not fit"}),
    ("a set that consolidates only whole: tried first, and merged", WHOLE_ONLY,
     [("multi-node-consolidation", "replace", ["a", "b", "c"], "s4")],
     ["a merge of the first 3 of the 3 candidates", "none of its nodes consolidates on its own"], {}),
    ("a budget of one node: no set to try", _ones(PAIR, ["1500m", "1500m"], budgets=[{"nodes": "1"}]), [], [],
     {"a": "can't replace with a cheaper node: its pods need a node costing $1.0000/h or more, and it costs "
           "$1.0000/h"}),
]


@pytest.mark.parametrize(("docs", "commands", "words", "kept"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_multi_node_consolidation_tries_the_merge(docs: list[Any], commands: list[tuple[str, str, list[str], str]],
                                                  words: list[str], kept: dict[str, str]) -> None:
    out = plan_dict(*docs)
    assert [(c["method"], c["action"], c["nodes"], c["replacements"][0]["instanceTypes"][0])
            for c in out["commands"]] == commands
    for word in words:
        assert all(word in c["explanation"] for c in out["commands"]), (word, out["commands"])
    for name, says in kept.items():
        assert says in blocked_of(out, name)["reason"]


def test_a_budget_of_one_node_tries_no_merge() -> None:
    out = plan_dict(*_ones(PAIR, ["1500m", "1500m"], budgets=[{"nodes": "1"}]))
    assert all("a merge" not in b["reason"] for b in out["blocked"])


def test_a_merge_is_verified_as_validation_verifies_it() -> None:
    """The command the search found is the one validation accepts on the snapshot it came from, and a pod that
    arrives on the other nodes' room makes it stale."""
    docs = _ones(PAIR, ["1300m", "1300m", "1300m"])
    found = plan(*docs).first.commands
    assert [c.nodes for c in found] == [("a", "b", "c")]
    command: Command = found[0]
    assert validate(command, snapshot(*docs), NOW) is None
    # a fourth pod on the nodes the merge empties no longer fits on the one replacement
    crowded = snapshot(*docs, pod("late", "a", cpu="200m"))
    assert validate(command, crowded, NOW) is not None


def test_a_merge_that_saves_less_than_its_nodes_one_at_a_time_is_left_to_single_node_consolidation() -> None:
    """``src``'s pod fits on ``dst``: deleting ``src`` saves $0.0416/h. Merging both into one r5.large saves
    $0.0116/h: Karpenter's search would take it (its multi-node consolidation runs first); ebb deletes ``src``, and
    ``dst`` says why the merge was refused."""
    out = plan_dict(nodepool(), node("src", itype="t3.medium"), node("dst", zone="us-east-1b"),
                    pod("filler", "dst", cpu="100m", memory="5Gi"), pod("p", "src", cpu="300m", memory="256Mi"))
    assert [(c["method"], c["action"], c["nodes"]) for c in out["commands"]] == [
        ("single-node-consolidation", "delete", ["src"])]
    assert ("consolidated one at a time, its nodes would save $0.0416/h, no less than its $0.0116/h"
            in blocked_of(out, "dst")["reason"])


def test_nodes_one_at_a_time_are_each_simulated_on_what_the_earlier_ones_left() -> None:
    """a, b and c ($1.00 each) hold a 1000m pod each; d (kept by a do-not-disrupt pod) has room for one of them. Each
    alone could be deleted onto d, but one at a time only the first is (its pod takes the room): $1.00/h, less than
    the $1.50/h of merging the three into one "two". The merge is taken, as Karpenter's search takes it; counted
    against the cluster as it is, the three deletes were worth $3.00/h together, and ebb deleted one node only."""
    keep = {"karpenter.sh/do-not-disrupt": "true"}
    docs = [PAIR, nodepool(), node("d", itype="two", zone="us-east-1b"),
            pod("filler", "d", cpu="2800m", annotations=keep), *_ones(PAIR, ["1000m"] * 3)[2:]]
    out = plan_dict(*docs)
    assert [(c["method"], c["action"], c["nodes"]) for c in out["commands"]] == [
        ("multi-node-consolidation", "replace", ["a", "b", "c"])]
    assert "one at a time its nodes would save $1.0000/h" in out["commands"][0]["explanation"], out["commands"]


def test_the_merge_search_considers_the_candidates_the_budget_allows() -> None:
    """Five candidates, a budget of three: the search considers the first three, of which the first two merge."""
    out = plan_dict(*_ones(PAIR, ["1500m"] * 5, budgets=[{"nodes": "3"}]))
    assert [(c["action"], c["nodes"]) for c in out["commands"]] == [("replace", ["a", "b"])]
    assert "a merge of the first 2 of the 3 candidates" in out["commands"][0]["explanation"]


# -- several replacements (EngineOptions.max_replacements) ----------------------------------------------------------


def test_with_several_replacements_a_set_is_repacked_onto_as_many_cheaper_nodes() -> None:
    """Six $1.00 nodes with a 1300m pod each: a "two" ($1.50/h) holds three of the pods. With Karpenter's one
    replacement the largest set that merges is three nodes; with two, all six go at once onto two "two" nodes, which
    validation accepts as it is, launching both."""
    docs = _ones(PAIR, ["1300m"] * 6)
    one = plan_dict(*docs)
    assert [(c["nodes"], [r["instanceTypes"][0] for r in c["replacements"]]) for c in one["commands"]] == [
        (["a", "b", "c"], ["two"])]
    assert "replaced by one two" in one["commands"][0]["explanation"]
    two = plan(*docs, max_replacements=2).first.commands
    assert [(c.nodes, [r.instance_types[0] for r in c.replacements]) for c in two] == [
        (("a", "b", "c", "d", "e", "f"), ["two", "two"])]
    assert two[0].savings == pytest.approx(6.0 - 3.0)
    assert "replaced by 2 nodes: two ($1.5000/h), two ($1.5000/h)" in two[0].explanation
    assert validate(two[0], snapshot(*docs), NOW) is None


def test_several_replacements_are_held_together_to_the_price_improvement_asked() -> None:
    """Each replacement alone costs far less than the six nodes; together they save 50%. A NodePool that asks 60%
    keeps the set, and the nodes say what was asked of the replacements together."""
    asked = _ones(PAIR, ["1300m"] * 6, disruption={"minimumPriceImprovementPercent": 60})
    out = plan_dict(*asked, max_replacements=2)
    assert all(len(c["replacements"]) <= 1 for c in out["commands"])
    reasons = " ".join(b["reason"] for b in out["blocked"])
    assert "into at most 2 new nodes was considered too and refused" in reasons
    assert "the replacements together cost $3.0000/h against $6.0000/h, 50.0% less" in reasons


def test_a_merge_is_weighed_against_its_nodes_one_at_a_time_less_what_their_evictions_ask() -> None:
    """With ``minimumSavingPerEvictedPod: 0.2``: ``d1`` ($0.50, one pod) pays for its eviction alone (net $0.30);
    ``d2`` ($0.30, two pods) does not ($0.40 asked). Merged, both save $0.80 for $0.60 asked, net $0.20: less than
    ``d1`` alone, so ``d1`` goes alone and ``d2`` stays (before, the merge was weighed by its saving before the price,
    $0.80 against $0.50, and evicted two pods the price had kept)."""
    pool = nodepool()
    pool["spec"]["disruption"]["minimumSavingPerEvictedPod"] = "0.2"
    types = catalog([instance_type("d1.t", "2", "8Gi", 110, 0.5), instance_type("d2.t", "2", "8Gi", 110, 0.3),
                     instance_type("k.16x", "16", "64Gi", 110, 2.0)])
    out = plan_dict(pool, types, node("keep", itype="k.16x", annotations={"karpenter.sh/do-not-disrupt": "true"}),
                    node("d1", itype="d1.t"), node("d2", itype="d2.t"),
                    pod("keep-app", "keep", cpu="1", memory="128Mi"), pod("d1-p1", "d1", cpu="100m", memory="128Mi"),
                    *(pod(f"d2-p{i}", "d2", cpu="100m", memory="128Mi") for i in (1, 2)))
    assert [(c["method"], c["nodes"]) for c in out["commands"]] == [("single-node-consolidation", ["d1"])]
    reason = blocked_of(out, "d2")["reason"]
    assert "minimumSavingPerEvictedPod" in reason
    assert ("consolidated one at a time, its nodes would save $0.3000/h, no less than its $0.2000/h (each less what "
            "its evictions ask (minimumSavingPerEvictedPod))") in reason


#: "hold" (a node that stays) at $2.00, "big" at $1.00, "cpu" (2 cpu, 2Gi) at $0.20 and "cpu.cheap" at $0.10, "mem"
#: (2 cpu, 9Gi) at $0.60
ROOM = catalog([instance_type("hold", "2", "16Gi", 29, 2.0), instance_type("big", "4", "32Gi", 29, 1.0),
                instance_type("cpu", "2", "2Gi", 29, 0.2), instance_type("cpu.cheap", "2", "2Gi", 29, 0.1),
                instance_type("mem", "2", "9Gi", 29, 0.6)])


def _room(a_memory: str) -> list[Any]:
    """``hold`` (kept by do-not-disrupt) has room for 1 cpu and 8Gi; ``a`` ($1.00) runs a pod of 500m and
    ``a_memory``, ``b`` ($0.20) one of 1 cpu and 1Gi: either fits in ``hold``'s room, not both (cpu)."""
    return [ROOM, nodepool(),
            node("hold", itype="hold", cpu="2", memory="16Gi"),
            pod("p-hold", "hold", cpu="1", memory="8Gi", annotations={"karpenter.sh/do-not-disrupt": "true"}),
            node("a", itype="big", cpu="4", memory="32Gi"), pod("p-a", "a", cpu="500m", memory=a_memory),
            node("b", itype="cpu", cpu="2", memory="2Gi"), pod("p-b", "b", cpu="1", memory="1Gi")]


# (the case, the memory of a's pod, the commands as (method, action, nodes, the replacement's type))
ONE_SAVES_MORE: list[tuple[str, str, list[tuple[str, str, list[str], str]]]] = [
    ("the greedy set saves less than its first node's delete once simulated jointly: the nodes go one at a time",
     # step by step a's pod goes to hold and b's to a cpu.cheap ($1.10); jointly b's pod, the larger, takes hold's
     # room and a's needs a mem ($0.60 saved), less than deleting a alone ($1.00)
     "7Gi", [("single-node-consolidation", "delete", ["a"], ""),
             ("single-node-consolidation", "replace", ["b"], "cpu.cheap")]),
    ("jointly a's pod needs only a cpu.cheap: the merge saves $1.10, more than any of its nodes alone",
     "1Gi", [("multi-node-consolidation", "replace", ["a", "b"], "cpu.cheap")]),
]


@pytest.mark.parametrize(("a_memory", "commands"), [c[1:] for c in ONE_SAVES_MORE], ids=[c[0] for c in ONE_SAVES_MORE])
def test_a_greedy_set_is_not_taken_when_one_of_its_nodes_alone_saves_as_much(
        a_memory: str, commands: list[tuple[str, str, list[str], str]]) -> None:
    out = plan_dict(*_room(a_memory))
    assert [(c["method"], c["action"], c["nodes"], c["replacements"][0]["instanceTypes"][0] if c["replacements"]
             else "") for c in out["commands"]] == commands
    assert sum(c["savingsPerHour"] for c in out["commands"]) == pytest.approx(1.1)


def test_a_merge_whose_only_cheaper_option_is_a_removed_nodes_type_says_so() -> None:
    """b (m5.large, 300m) and c (m5.2xlarge, 6 cpu): together they fit one m5.2xlarge at $0.384, less than the pair's
    $0.48, but that is c's type: keeping c and deleting b does as well, so the option is left out (Karpenter's
    ``filterOutSameInstanceType``). The merge's note on c names that rule, not a price the pods do not need."""
    types = [instance_type("m5.large", "2", "8Gi", 29, 0.096), instance_type("m5.2xlarge", "8", "32Gi", 58, 0.384)]
    docs = [catalog(types), nodepool(), node("b", itype="m5.large"), pod("b-1", "b", cpu="300m"),
            node("c", itype="m5.2xlarge", cpu="8", memory="32Gi"), pod("c-1", "c", cpu="6", memory="24Gi")]
    out = plan_dict(*docs)
    assert [c["nodes"] for c in out["commands"]] == [["b"]]
    reason = blocked_of(out, "c")["reason"]
    assert "its pods fit type m5.2xlarge ($0.3840/h against $0.4800/h), the same type as c, which it would " \
           "remove" in reason
    assert "need a node costing $0.4800/h" not in reason


def test_karpenters_search_starts_at_half_the_candidates_and_misses_a_set_that_consolidates_only_whole() -> None:
    """Karpenter's ``firstNConsolidationOption`` binary-searches the prefix length from the middle (``mid := (min +
    max) / 2`` with ``min`` 1 and ``max`` the candidates less one): of three candidates its first probe is the first
    two, refused here (their pods need an s4, $0.21/h, dearer than their $0.20/h), after which no longer prefix is
    tried. The back-test's Karpenter (``karpenter_pace``) keeps that search and merges nothing; ebb's merge search
    tries the whole set first (the case above) and merges the three (docs/decisions.md, Differences)."""
    pace = plan_json(make_plan(snapshot(*WHOLE_ONLY), NOW, options=EngineOptions(karpenter_pace=True)))
    assert pace["commands"] == []
    own = plan_json(make_plan(snapshot(*WHOLE_ONLY), NOW))
    assert [(c["method"], c["nodes"]) for c in own["commands"]] == [("multi-node-consolidation", ["a", "b", "c"])]


def test_karpenters_search_reaches_a_prefix_of_101_candidates() -> None:
    """``maxParallel`` clamps the candidates to 100, but ``firstNConsolidationOption`` lowers ``max`` to the
    candidates less one only when there are no more than that: with more, ``max`` stays 100 and the prefix
    ``candidates[0 : mid+1]`` reaches 101 nodes. 102 nodes of $1.00/h, each with a 30m pod, all fit one $1.50/h
    node (and none on another, each holding one pod at most): Karpenter's search merges 101 of them at once, and so
    does the back-test's."""
    docs: list[Any] = [catalog([instance_type("one", "2", "8Gi", 1, 1.0), instance_type("big", "8", "32Gi", 110, 1.5)]),
                       nodepool(budgets=[{"nodes": "100%"}])]
    for i in range(102):
        docs += [node(f"n{i:03d}", itype="one"), pod(f"p{i:03d}", f"n{i:03d}", cpu="30m")]
    out = plan_json(make_plan(snapshot(*docs), NOW, options=EngineOptions(karpenter_pace=True, explain=False)))
    assert [(c["method"], len(c["nodes"])) for c in out["commands"]] == [("multi-node-consolidation", 101)]


def test_the_merge_search_also_tries_the_prefixes_of_karpenters_order() -> None:
    """x (a c1, $0.05/h) runs one 900m pod, y and z (c2s, $0.09/h) two 800m pods each. In disruption-cost order x
    comes first, and no set holding it merges (x and y need a c4 at $0.17/h against their $0.14/h; the three a c8).
    Karpenter's order (``sortCandidates``: price per disruption, $0.09/3 before $0.05/2) puts y and z first, and its
    search merges them onto one c4 ($0.17/h against $0.18/h). ebb's merge search tries that order too."""
    cat = catalog([instance_type("c1", "1", "2Gi", 29, 0.05), instance_type("c2", "2", "4Gi", 29, 0.09),
                   instance_type("c4", "4", "8Gi", 29, 0.17), instance_type("c8", "8", "16Gi", 29, 0.32)])
    docs: list[Any] = [cat, nodepool(), node("x", itype="c1", cpu="1", memory="2Gi"), pod("p-x", "x", cpu="900m")]
    for name in "yz":
        docs += [node(name, itype="c2", cpu="2", memory="4Gi"),
                 pod(f"{name}-0", name, cpu="800m"), pod(f"{name}-1", name, cpu="800m")]
    out = plan_dict(*docs)
    assert [(c["method"], c["nodes"], c["replacements"][0]["instanceTypes"][0]) for c in out["commands"]] == [
        ("multi-node-consolidation", ["y", "z"], "c4")]
    assert "in Karpenter's order" in out["commands"][0]["explanation"]
