"""ebb.core.conflicts: each check on its own (a case that raises it, a case beside it that does not), when there is
a Karpenter to conflict with, and what a conflict refuses: no node of its NodePool is a candidate in ``enforce``
mode, each says why; nothing is refused in ``shadow`` mode or by a conflict that names no NodePool."""

from __future__ import annotations

from typing import Any

import pytest

from ebb.core.causes import Cause
from ebb.core.conflicts import (
    NO_CONFLICT,
    Condition,
    Conflict,
    ConflictKind,
    ConflictSettings,
    conflict_json,
    conflicts,
    karpenter_seen,
    karpenter_stopped_by,
    policy_condition,
    refused,
)
from ebb.core.engine import ALL_METHODS, run_pass
from ebb.core.methods.base import EngineOptions
from ebb.core.model import Budget
from ebb.core.plan import make_plan, plan_json
from tests.kit.builders import NOW, OLD, disruption_policy, node, nodeclaim, nodepool, pod, snapshot

K = ConflictKind
KARPENTER = ConflictSettings("karpenter")
NONE = ConflictSettings("none")
#: a NodePool on which Karpenter disrupts nothing (docs/karpenter.md): budgets nodes "0", expireAfter Never
SWITCHED_OFF: dict[str, Any] = {"budgets": [{"nodes": "0"}], "expire_after": "Never"}


def karpenter_deployment(*, env: list[dict[str, Any]] | None = None, args: list[str] | None = None,
                         labels: dict[str, str] | None = None, image: str = "public.ecr.aws/karpenter/controller:1.1.0",
                         name: str = "karpenter") -> dict[str, Any]:
    container: dict[str, Any] = {"name": "controller", "image": image}
    if env is not None:
        container["env"] = env
    if args is not None:
        container["args"] = args
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "kube-system", "labels": labels or {}},
            "spec": {"template": {"spec": {"containers": [container]}}}}


def kinds(found: tuple[Conflict, ...]) -> list[tuple[str, str | None]]:
    return [(str(c.kind), c.nodepool) for c in found]


# (case, documents, settings, the conflicts as (kind, NodePool))
CASES: list[tuple[str, list[Any], ConflictSettings, list[tuple[str, str | None]]]] = [
    # -- no Karpenter to conflict with: a NodePool's own settings are ebb's alone
    ("no karpenter: the NodePool's budgets and expiry are ebb's", [nodepool(budgets=None)], NONE, []),
    ("no karpenter with the kwok provider either", [nodepool(budgets=None)], ConflictSettings("kwok"), []),
    # -- Karpenter's budgets
    ("karpenter provider, default budgets and expiry", [nodepool(budgets=None)], KARPENTER,
     [(K.KARPENTER_BUDGETS, "default"), (K.KARPENTER_EXPIRY, "default")]),
    ("budgets 0 and Never: nothing to say", [nodepool(**SWITCHED_OFF)], KARPENTER, []),
    ("budgets 0% count as 0", [nodepool(budgets=[{"nodes": "0%"}], expire_after="Never")], KARPENTER, []),
    ("a zero budget only in a window leaves Karpenter the rest of the time",
     [nodepool(budgets=[{"nodes": "0", "schedule": "0 9 * * *", "duration": "8h"}], expire_after="Never")], KARPENTER,
     [(K.KARPENTER_BUDGETS, "default")]),
    ("a zero budget for Underutilized only leaves Karpenter drift and emptiness",
     [nodepool(budgets=[{"nodes": "0", "reasons": ["Underutilized"]}], expire_after="Never")], KARPENTER,
     [(K.KARPENTER_BUDGETS, "default")]),
    ("a zero budget for all of Karpenter's reasons stops it",
     [nodepool(budgets=[{"nodes": "0", "reasons": ["Empty", "Drifted", "Underutilized"]}], expire_after="Never")],
     KARPENTER, []),
    ("NodeClaims show a Karpenter without the provider saying so",
     [nodepool(budgets=[{"nodes": "10%"}], expire_after="Never"), node("n1"), nodeclaim("c1", "n1")],
     ConflictSettings("none"),
     [(K.KARPENTER_BUDGETS, "default"), (K.NODECLAIMS_WITHOUT_KARPENTER_PROVIDER, "default")]),
    ("Karpenter's Deployment shows a Karpenter", [nodepool(budgets=[{"nodes": "10%"}], expire_after="Never"),
                                                  karpenter_deployment()], NONE, [(K.KARPENTER_BUDGETS, "default")]),
    # -- under a DisruptionPolicy the NodePool's own settings are Karpenter's, and still checked
    ("a DisruptionPolicy does not hide the NodePool's own budgets",
     [nodepool(budgets=[{"nodes": "100%"}], expire_after="Never"), disruption_policy(budgets=[{"nodes": "0"}])],
     KARPENTER, [(K.KARPENTER_BUDGETS, "default")]),
    ("a DisruptionPolicy with a NodePool switched off: nothing to say",
     [nodepool(**SWITCHED_OFF), disruption_policy(budgets=[{"nodes": "20%"}], expireAfter="720h")], KARPENTER, []),
    # -- Karpenter's expiry
    ("expireAfter stated on the NodePool", [nodepool(budgets=[{"nodes": "0"}], expire_after="168h")], KARPENTER,
     [(K.KARPENTER_EXPIRY, "default")]),
    ("expireAfter unset on the NodePool under a policy: Karpenter's default",
     [nodepool(budgets=[{"nodes": "0"}]), disruption_policy(expireAfter="Never")], KARPENTER,
     [(K.KARPENTER_EXPIRY, "default")]),
    # -- NodeClaims launched before the switch keep their expiry
    ("a NodeClaim launched with an expireAfter",
     [nodepool(**SWITCHED_OFF), node("n1"), nodeclaim("c1", "n1", expire_after="720h", created=OLD)],
     KARPENTER, [(K.NODECLAIM_EXPIRY, "default")]),
    ("a NodeClaim launched with Never", [nodepool(**SWITCHED_OFF), node("n1"),
                                         nodeclaim("c1", "n1", expire_after="Never")], KARPENTER, []),
    # a NodeClaim whose input states no expireAfter (hand-written: Karpenter writes its NodePool's into every NodeClaim
    # it launches, and its CRD defaults the field to 720h) is read with its NodePool's
    ("a NodeClaim stating no expireAfter, its NodePool's 168h",
     [nodepool(budgets=[{"nodes": "0"}], expire_after="168h"), node("n1"), nodeclaim("c1", "n1", created=OLD)],
     KARPENTER, [(K.KARPENTER_EXPIRY, "default"), (K.NODECLAIM_EXPIRY, "default")]),
    ("a NodeClaim stating no expireAfter, its NodePool setting none: Karpenter's default 720h",
     [nodepool(budgets=[{"nodes": "0"}]), node("n1"), nodeclaim("c1", "n1", created=OLD)],
     KARPENTER, [(K.KARPENTER_EXPIRY, "default"), (K.NODECLAIM_EXPIRY, "default")]),
    ("a NodeClaim stating no expireAfter, its NodePool's Never", [nodepool(**SWITCHED_OFF), node("n1"),
                                                                 nodeclaim("c1", "n1", created=OLD)], KARPENTER, []),
    ("a NodeClaim being deleted does not count", [nodepool(**SWITCHED_OFF), node("n1"),
                                                  nodeclaim("c1", "n1", expire_after="720h", deleting=True)],
     KARPENTER, []),
    # -- the provider
    ("NodeClaims with the kwok provider", [nodepool(**SWITCHED_OFF), node("n1"), nodeclaim("c1", "n1")],
     ConflictSettings("kwok"), [(K.NODECLAIMS_WITHOUT_KARPENTER_PROVIDER, "default")]),
    ("NodeClaims with the simulated provider", [nodepool(**SWITCHED_OFF), node("n1"), nodeclaim("c1", "n1")],
     ConflictSettings("simulated"), [(K.NODECLAIMS_WITHOUT_KARPENTER_PROVIDER, "default")]),
    ("NodeClaims of a NodePool that is not there name no NodePool",
     [nodepool(**SWITCHED_OFF), node("n1", pool="gone"), nodeclaim("c1", "n1", pool="gone")],
     ConflictSettings("kwok"), [(K.NODECLAIMS_WITHOUT_KARPENTER_PROVIDER, None)]),
    ("NodeClaims with the karpenter provider", [nodepool(**SWITCHED_OFF), node("n1"), nodeclaim("c1", "n1")],
     KARPENTER, []),
    # -- a DisruptionPolicy without its NodePool: with or without Karpenter
    ("a DisruptionPolicy without a NodePool", [nodepool(), disruption_policy("gone")], NONE,
     [(K.POLICY_WITHOUT_NODEPOOL, None)]),
    ("a DisruptionPolicy with its NodePool", [nodepool(), disruption_policy("default")], NONE, []),
    # -- Karpenter's interruption queue while ebb's ingester runs
    ("the queue in Karpenter's env, ebb's ingester on",
     [nodepool(**SWITCHED_OFF), karpenter_deployment(env=[{"name": "INTERRUPTION_QUEUE", "value": "my-cluster"}])],
     ConflictSettings("karpenter", interruption_ingester=True), [(K.INTERRUPTION_QUEUE, None)]),
    ("the queue as Karpenter's argument",
     [nodepool(**SWITCHED_OFF), karpenter_deployment(args=["--interruption-queue=my-cluster"])],
     ConflictSettings("karpenter", interruption_ingester=True), [(K.INTERRUPTION_QUEUE, None)]),
    ("the queue from a ConfigMap, a Deployment known by its chart's label",
     [nodepool(**SWITCHED_OFF), karpenter_deployment(
         env=[{"name": "INTERRUPTION_QUEUE", "valueFrom": {"configMapKeyRef": {"name": "k", "key": "q"}}}],
         labels={"app.kubernetes.io/name": "karpenter"}, image="registry.local/mirror/ctl:1")],
     ConflictSettings("karpenter", interruption_ingester=True), [(K.INTERRUPTION_QUEUE, None)]),
    ("the queue set, ebb's ingester off",
     [nodepool(**SWITCHED_OFF), karpenter_deployment(env=[{"name": "INTERRUPTION_QUEUE", "value": "my-cluster"}])],
     KARPENTER, []),
    ("the queue empty", [nodepool(**SWITCHED_OFF), karpenter_deployment(env=[{"name": "INTERRUPTION_QUEUE",
                                                                               "value": ""}])],
     ConflictSettings("karpenter", interruption_ingester=True), []),
    ("another Deployment is not Karpenter's",
     [nodepool(**SWITCHED_OFF), karpenter_deployment(image="nginx:1", env=[{"name": "INTERRUPTION_QUEUE",
                                                                             "value": "q"}])],
     ConflictSettings("karpenter", interruption_ingester=True), []),
]


@pytest.mark.parametrize(("documents", "settings", "expected"), [case[1:] for case in CASES],
                         ids=[case[0] for case in CASES])
def test_each_check(documents: list[Any], settings: ConflictSettings, expected: list[tuple[str, str | None]]) -> None:
    found = conflicts(snapshot(*documents), settings)
    assert kinds(found) == expected
    for conflict in found:  # each sentence names the object to fix
        assert conflict.object.split(" ", 1)[1].split(",")[0] in conflict.message


def test_the_sentences_say_what_to_change() -> None:
    found = conflicts(snapshot(nodepool(budgets=None), node("n1"),
                               nodeclaim("c1", "n1", expire_after="720h", created=OLD)), KARPENTER)
    by_kind = {c.kind: c.message for c in found}
    assert 'set spec.disruption.budgets to [{nodes: "0"}]' in by_kind[K.KARPENTER_BUDGETS]
    assert '[{nodes: "10%"}]' in by_kind[K.KARPENTER_BUDGETS]  # Karpenter's default, as the parser reads it
    assert "720h (Karpenter's default, as the NodePool sets none)" in by_kind[K.KARPENTER_EXPIRY]
    assert "set it to Never" in by_kind[K.KARPENTER_EXPIRY]
    # the first expiry: launched 2026-11-20 plus 30 days
    assert "c1; the first expires at 2026-12-20T00:00:00Z" in by_kind[K.NODECLAIM_EXPIRY]
    assert "kubectl delete nodeclaim" in by_kind[K.NODECLAIM_EXPIRY]


def test_a_nodeclaim_stating_no_expire_after_is_read_with_its_nodepools() -> None:
    found = conflicts(snapshot(nodepool(budgets=[{"nodes": "0"}], expire_after="168h"), node("n1"),
                               nodeclaim("c1", "n1", created=OLD)), KARPENTER)
    by_kind = {c.kind: c.message for c in found}
    # launched 2026-11-20 plus the NodePool's 7 days
    assert ("(c1; the first expires at 2026-11-27T00:00:00Z; c1 state(s) none, read as the NodePool's, which "
            "Karpenter writes into every NodeClaim it launches)") in by_kind[K.NODECLAIM_EXPIRY]


def test_karpenter_seen() -> None:
    assert karpenter_seen(snapshot(nodepool()), NONE) is None
    assert karpenter_seen(snapshot(nodepool()), KARPENTER) == "the provider is karpenter"
    assert karpenter_seen(snapshot(nodepool(), node("n1"), nodeclaim("c1", "n1")), NONE) == \
        "the cluster has 1 NodeClaim(s)"
    assert karpenter_seen(snapshot(nodepool(), karpenter_deployment()), NONE) == \
        "Karpenter's Deployment kube-system/karpenter is there"


@pytest.mark.parametrize(("budgets", "stopped"), [
    ((Budget("0"),), True),
    ((Budget("10%"), Budget("0")), True),
    ((Budget(" 0 "),), True),
    ((Budget("1"),), False),
    ((Budget("0", schedule="@daily", duration="1h"),), False),
    ((Budget("0", reasons=("Empty", "Drifted")),), False),
    ((), False),
    # Karpenter takes the smallest active budget per reason: zero budgets that together cover every reason stop it
    ((Budget("0", reasons=("Empty", "Drifted")), Budget("0", reasons=("Underutilized",))), True),
    ((Budget("0", reasons=("Empty", "Drifted")), Budget("1", reasons=("Underutilized",))), False),
    ((Budget("00"),), True),  # the CRD admits it, and Karpenter reads it as 0
    ((Budget("00%"),), True),
])
def test_karpenter_stopped_by(budgets: tuple[Budget, ...], stopped: bool) -> None:
    assert karpenter_stopped_by(budgets) is stopped


def test_the_budgets_message_quotes_each_budget_whole() -> None:
    budgets = [{"nodes": "0", "schedule": "0 9 * * 1-5", "duration": "8h", "reasons": ["Drifted"]}, {"nodes": "10%"}]
    found = conflicts(snapshot(nodepool(budgets=budgets, expire_after="Never")), KARPENTER)
    message = next(c.message for c in found if c.kind is K.KARPENTER_BUDGETS)
    assert ('[{nodes: "0", schedule: "0 9 * * 1-5", duration: 8h, reasons: [Drifted]}, {nodes: "10%"}]'
            in message)


def test_refused_in_enforce_mode_only_the_pools_named() -> None:
    found = conflicts(snapshot(nodepool(budgets=None), nodepool("quiet", **SWITCHED_OFF), disruption_policy("gone")),
                      KARPENTER)
    assert set(refused(found)) == {"default"}
    assert refused(found)["default"].kind is K.KARPENTER_BUDGETS  # the first of the pool's conflicts
    assert refused(found, "shadow") == {}


def _cluster(pool: dict[str, Any]) -> list[Any]:
    return [pool, nodepool("quiet", **SWITCHED_OFF), node("idle"), node("idle-quiet", pool="quiet"),
            nodeclaim("c-idle", "idle", expire_after="Never"), nodeclaim("c-quiet", "idle-quiet", pool="quiet",
                                                                         expire_after="Never")]


def test_a_conflicting_pool_is_not_disrupted_and_each_node_says_why() -> None:
    snap = snapshot(*_cluster(nodepool(budgets=[{"nodes": "100%"}], expire_after="Never")))
    options = EngineOptions(require_nodeclaim=True, refuse_conflicts=KARPENTER)
    result = run_pass(options.view_of(snap, NOW), options)
    assert {n for c in result.commands for n in c.nodes} == set()  # quiet's budget is 0 for ebb too
    blocked = {b.node: b for b in result.blocked}
    assert blocked["idle"].method == ALL_METHODS
    assert blocked["idle"].cause.kind is Cause.KARPENTER_CONFLICT
    assert blocked["idle"].reason.startswith("ebb disrupts no node of NodePool default until this conflict is fixed: "
                                             "NodePool default still lets Karpenter disrupt its nodes")
    assert blocked["idle-quiet"].cause.kind is not Cause.KARPENTER_CONFLICT


def test_the_same_pool_is_disrupted_once_fixed_or_without_refusing() -> None:
    conflicting = snapshot(*_cluster(nodepool(budgets=[{"nodes": "100%"}], expire_after="Never")))
    fixed = snapshot(*_cluster(nodepool(**SWITCHED_OFF)), disruption_policy(budgets=[{"nodes": "100%"}]))
    refusing = EngineOptions(require_nodeclaim=True, refuse_conflicts=KARPENTER)
    library = EngineOptions(require_nodeclaim=True)
    assert [c.nodes for c in run_pass(refusing.view_of(fixed, NOW), refusing).commands] == [("idle",)]
    assert [c.nodes for c in run_pass(library.view_of(conflicting, NOW), library).commands] == [("idle",)]


def test_plan_json_carries_the_warnings() -> None:
    snap = snapshot(nodepool(budgets=None), node("idle"), disruption_policy("gone"))
    plan = make_plan(snap, NOW, options=EngineOptions(require_nodeclaim=True, refuse_conflicts=KARPENTER),
                     conflict_settings=KARPENTER)
    out = plan_json(plan)
    assert [(w["kind"], w["nodePool"]) for w in out["warnings"]] == [
        ("KarpenterBudgets", "default"), ("KarpenterExpiry", "default"), ("PolicyWithoutNodePool", None)]
    assert out["warnings"][0] == conflict_json(plan.warnings[0])
    # without conflict settings the plan says nothing of conflicts
    assert plan_json(make_plan(snap, NOW))["warnings"] == []


def test_the_conflict_free_condition_of_each_policy() -> None:
    found = conflicts(snapshot(nodepool(budgets=None), nodepool("quiet", **SWITCHED_OFF), disruption_policy("default"),
                               disruption_policy("quiet"), disruption_policy("gone")), KARPENTER)
    default = policy_condition("default", found)
    assert (default.status, default.reason) == ("False", "KarpenterBudgets")
    # every conflict of the pool, each a sentence
    assert default.message.count("NodePool default") >= 2 and "spec.template.spec.expireAfter" in default.message
    assert policy_condition("quiet", found) == Condition("True", NO_CONFLICT,
                                                         "no conflict with Karpenter: ebb disrupts this NodePool")
    gone = policy_condition("gone", found)
    assert (gone.status, gone.reason) == ("False", "PolicyWithoutNodePool")
    assert gone.message.startswith("DisruptionPolicy gone names no NodePool")


def test_a_nodeclaim_without_its_nodepool_label_is_of_its_nodes_nodepool() -> None:
    """A NodeClaim of another provider's is that of its Node's NodePool when it has no karpenter.sh/nodepool label
    (found by status.nodeName), so the NodePool is refused: with the conflict named for no NodePool, ebb only warned
    and deleted the node, taking Karpenter's finalizer off a NodeClaim whose instance then never terminates."""
    claim = nodeclaim("c1", "n1")
    del claim["metadata"]["labels"]["karpenter.sh/nodepool"]
    found = conflicts(snapshot(nodepool(**SWITCHED_OFF), node("n1"), claim), ConflictSettings("kwok"))
    assert kinds(found) == [(K.NODECLAIMS_WITHOUT_KARPENTER_PROVIDER, "default")]


#: the pods keep to one a host: each node is replaced, one a step (a budget of one node)
ONE_PER_HOST = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}


def test_until_stable_with_a_pool_handed_over_goes_on_past_its_first_step() -> None:
    """docs/karpenter.md's set-up: the NodePool's budgets "0" and template expireAfter Never, the DisruptionPolicy's
    expireAfter 720h and budget 1. A replacement's NodeClaim takes the NodePool template's expireAfter (Never), as the
    launcher gives it; the simulated one took the DisruptionPolicy's, so from the second step the pool conflicted
    (NodeClaims that expire) and `--until-stable` stopped after one replacement."""
    docs = [nodepool(**SWITCHED_OFF), disruption_policy(budgets=[{"nodes": "1"}], expireAfter="720h"),
            *(doc for name in ("a", "b") for doc in (node(name, itype="m5.2xlarge"),
                                                     nodeclaim(f"c-{name}", name, expire_after="Never"),
                                                     pod(f"p-{name}", name, cpu="500m", memory="1Gi",
                                                         labels={"app": "web"}, affinity=ONE_PER_HOST)))]
    result = make_plan(snapshot(*docs), NOW, until_stable=True,
                       options=EngineOptions(require_nodeclaim=True, refuse_conflicts=KARPENTER),
                       conflict_settings=KARPENTER)
    out = plan_json(result)
    replaced = [n for step in out["steps"] for c in step["commands"] for n in c["nodes"]]
    assert sorted(replaced) == ["a", "b"], replaced
