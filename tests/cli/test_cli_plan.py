"""`ebb plan` on the command line (docs/plan.md): JSON and table output, exit codes, error messages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from ebb_cli.main import app
from tests.kit.builders import budget_bound_cluster, catalog, node, nodeclaim, nodepool, pod, repack_cluster

NOW_ARG = "2026-11-23T18:30:00Z"


def _write(tmp_path: Path, *docs: Any, name: str = "cluster.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all([*docs, catalog()], sort_keys=False), encoding="utf-8")
    return str(path)


def _cluster() -> list[Any]:
    return [nodepool(), node("idle"), node("busy", itype="t3.medium"), pod("db", "busy", cpu="1800m")]


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_plan_json(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["plan", "-f", _write(tmp_path, *_cluster()), "--now", NOW_ARG, "-o", "json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["now"] == NOW_ARG
    assert [(c["method"], c["nodes"]) for c in out["commands"]] == [("emptiness", ["idle"])]
    assert [b["node"] for b in out["blocked"]] == ["busy"]
    assert "steps" not in out


def test_plan_several_files_and_until_stable(runner: CliRunner, tmp_path: Path) -> None:
    first = _write(tmp_path, nodepool(), node("idle"), name="a.yaml")
    second = tmp_path / "b.yaml"
    second.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List",
                                      "items": [node("busy", itype="t3.medium"), pod("db", "busy", cpu="1800m")]}),
                      encoding="utf-8")
    result = runner.invoke(app, ["plan", "-f", first, "-f", str(second), "--now", NOW_ARG, "-o", "json",
                                 "--until-stable"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert {b["node"] for b in out["blocked"]} == {"busy"}
    assert out["steps"]
    assert out["steps"][0]["commands"] == out["commands"]


NO_NODECLAIM = "it has no NodeClaim: with the karpenter provider ebb retires nodes by deleting their NodeClaim"


@pytest.mark.parametrize(("args", "idle"), [
    ([], "disrupted"),
    (["--provider", "none"], "disrupted"),
    (["--provider", "kwok"], "disrupted"),
    (["--provider", "karpenter"], NO_NODECLAIM),
])
def test_provider_karpenter_leaves_nodes_without_a_nodeclaim_alone(runner: CliRunner, tmp_path: Path,
                                                                    args: list[str], idle: str) -> None:
    result = runner.invoke(app, ["plan", "-f", _write(tmp_path, *_cluster()), "--now", NOW_ARG, "-o", "json", *args])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    reasons = {b["node"]: b["reason"] for b in out["blocked"]}
    assert reasons.get("idle", "disrupted") == idle


def test_unknown_provider_exits_2(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["plan", "-f", _write(tmp_path, *_cluster()), "--provider", "aws"])
    assert result.exit_code == 2
    assert "--provider" in result.output


def test_a_disruption_policy_is_read_and_an_orphan_one_warned_about(runner: CliRunner, tmp_path: Path) -> None:
    policies = [{"apiVersion": "ebb.sh/v1", "kind": "DisruptionPolicy", "metadata": {"name": name},
                 "spec": {"consolidationPolicy": "WhenEmpty", "budgets": [{"nodes": "0"}]}}
                for name in ("default", "gone")]
    result = runner.invoke(app, ["plan", "-f", _write(tmp_path, *_cluster(), *policies), "--now", NOW_ARG, "-o",
                                 "json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["commands"] == []
    assert {b["reason"] for b in out["budgets"]} == {"Expired", "Drifted", "Empty", "Underutilized"}
    assert all("of DisruptionPolicy default allows 0" in b["detail"] for b in out["budgets"])
    assert result.stderr.strip() == ("warning: 1 DisruptionPolicy document(s) name no NodePool of the input and apply "
                                     "to nothing (a DisruptionPolicy is named after the NodePool it is for): "
                                     "DisruptionPolicy gone")


def test_a_demand_window_is_noted_as_needing_a_running_planner(runner: CliRunner, tmp_path: Path) -> None:
    policy = {"apiVersion": "ebb.sh/v1", "kind": "DisruptionPolicy", "metadata": {"name": "default"},
              "spec": {"demandWindow": "35m"}}
    result = runner.invoke(app, ["plan", "-f", _write(tmp_path, *_cluster(), policy), "--now", NOW_ARG, "-o", "json"])
    assert result.exit_code == 0, result.output
    plain = runner.invoke(app, ["plan", "-f", _write(tmp_path, *_cluster(), name="plain.yaml"), "--now", NOW_ARG,
                                "-o", "json"])
    commands = json.loads(result.stdout)["commands"]
    assert commands and commands == json.loads(plain.stdout)["commands"]  # idle goes: no record, no peak
    assert result.stderr.strip() == ("note: the demandWindow of NodePool(s) default keeps the peak of the demand a "
                                     "running planner records; a snapshot has no such record, so this plan keeps "
                                     "only what the pods request now (docs/decisions.md#churn-control)")


def test_invalid_input_exits_2_naming_document_and_field(runner: CliRunner, tmp_path: Path) -> None:
    path = _write(tmp_path, nodepool(), node("a"), pod("web", "a", cpu="two"))
    result = runner.invoke(app, ["plan", "-f", path, "--now", NOW_ARG, "-o", "json"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "Pod default/web" in result.stderr
    assert "spec.containers[0].resources.requests.cpu" in result.stderr


def test_an_error_in_the_second_file_names_that_file_and_numbers_documents_within_it(runner: CliRunner,
                                                                                      tmp_path: Path) -> None:
    first = _write(tmp_path, nodepool(), node("a"), node("b"), name="first.yaml")
    second = tmp_path / "second.yaml"
    second.write_text("- just\n- a list\n", encoding="utf-8")
    result = runner.invoke(app, ["plan", "-f", first, "-f", str(second), "--now", NOW_ARG, "-o", "json"])
    assert result.exit_code == 2 and result.stdout == ""
    assert f"error: {second}: document 1: (root): is not a mapping" in result.stderr, result.stderr
    named = _write(tmp_path, pod("web", "a", cpu="two"), name="pods.yaml")
    result = runner.invoke(app, ["plan", "-f", first, "-f", named, "--now", NOW_ARG, "-o", "json"])
    assert result.exit_code == 2
    assert f"error: {named}: Pod default/web: spec.containers[0].resources.requests.cpu" in result.stderr


def test_invalid_operator_exits_2(runner: CliRunner, tmp_path: Path) -> None:
    path = _write(tmp_path, nodepool(requirements=[{"key": "zone", "operator": "Near", "values": ["a"]}]))
    result = runner.invoke(app, ["plan", "-f", path, "--now", NOW_ARG])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "NodePool default" in result.stderr
    assert "operator" in result.stderr


def test_missing_file_exits_2(runner: CliRunner, tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.yaml")
    result = runner.invoke(app, ["plan", "-f", missing, "--now", NOW_ARG, "-o", "json"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "nope.yaml" in result.stderr


def test_not_yaml_exits_2(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("kind: Node\nmetadata: {name: [unclosed\n", encoding="utf-8")
    result = runner.invoke(app, ["plan", "-f", str(path), "--now", NOW_ARG, "-o", "json"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "broken.yaml" in result.stderr


@pytest.mark.parametrize(("cpu", "words"), [("1e30", "is too large"), ("99999999999999999999", "is too large"),
                                           ("-4", "is negative")])
def test_absurd_or_negative_request_exits_2_naming_the_field(runner: CliRunner, tmp_path: Path, cpu: str,
                                                            words: str) -> None:
    """A request the simulator cannot hold (an OverflowError traceback before) or a negative one (accepted
    before) ends with exit 2 and a message naming the document and field, and prints nothing on stdout."""
    docs = [nodepool(), node("busy", itype="t3.medium"), pod("db", "busy", cpu=cpu)]
    result = runner.invoke(app, ["plan", "-f", _write(tmp_path, *docs), "--now", NOW_ARG, "-o", "json"])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert "Pod default/db: spec.containers[0].resources.requests.cpu" in result.stderr and words in result.stderr
    assert "Traceback" not in result.output


def test_empty_input_and_unread_kinds_are_warned_about_on_stderr(runner: CliRunner, tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("", encoding="utf-8")
    result = runner.invoke(app, ["plan", "-f", str(empty), "--now", NOW_ARG, "-o", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["commands"] == []
    assert "warning: the input holds no Nodes, Pods or NodePools" in result.stderr
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "default"}}
    result = runner.invoke(app, ["plan", "-f", _write(tmp_path, *_cluster(), config), "--now", NOW_ARG, "-o", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["commands"]  # the plan itself is unchanged
    assert result.stderr.strip() == ("warning: ignored 1 document(s) of kinds ebb does not read: "
                                     "ConfigMap default/cm")


def test_the_table_says_why_an_invalid_budget_allows_nothing(runner: CliRunner, tmp_path: Path) -> None:
    pool = nodepool(budgets=[{"nodes": "1", "schedule": "not a cron", "duration": "1h"}])
    result = runner.invoke(app, ["plan", "-f", _write(tmp_path, pool), "--now", NOW_ARG])
    assert result.exit_code == 0, result.output
    words = " ".join(result.stdout.split())  # rich wraps lines at the console's width
    assert words.count("invalid budget: budget 0 of NodePool default is invalid (schedule 'not a cron' is not a "
                       "cron expression or @-macro Karpenter reads (expected exactly 5 fields, found 3: ['not', 'a', "
                       "'cron'])); ebb fails closed and disrupts nothing in this pool") == 1


def test_now_with_an_offset_is_that_moment_in_utc(runner: CliRunner, tmp_path: Path) -> None:
    """``--now 2026-11-23T00:15:00+01:00`` is 23:15 UTC the day before, not 00:15 UTC."""
    result = runner.invoke(app, ["plan", "-f", _write(tmp_path, *_cluster()), "--now", "2026-11-23T00:15:00+01:00",
                                 "-o", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["now"] == "2026-11-22T23:15:00Z"


def test_bad_now_exits_2(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["plan", "-f", _write(tmp_path, *_cluster()), "--now", "yesterday"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "--now" in result.stderr


def test_plan_table(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["plan", "-f", _write(tmp_path, *_cluster()), "--now", NOW_ARG, "-o", "table"])
    assert result.exit_code == 0, result.output
    text = result.stdout
    for section in ("Commands", "Not disrupted, and why", "Budgets", "Cost of NodePool nodes"):
        assert section in text
    assert "emptiness" in text
    assert "idle" in text
    assert "busy" in text


def test_plan_table_until_stable(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["plan", "-f", _write(tmp_path, *_cluster()), "--now", NOW_ARG,
                                 "--until-stable"])
    assert result.exit_code == 0, result.output
    assert "Until stable" in result.stdout


def test_plan_table_until_stable_that_never_settles_says_so(runner: CliRunner, tmp_path: Path) -> None:
    """A NodePool whose nodes expire faster than a step: each pass replaces the last one's node. The line under the
    table said "then nothing was left to do" and counted the last pass, whose commands were not applied."""
    docs = [nodepool(expire_after="1s"), node("a"), pod("web", "a")]
    result = runner.invoke(app, ["plan", "-f", _write(tmp_path, *docs), "--now", NOW_ARG, "--until-stable"])
    assert result.exit_code == 0, result.output
    assert "without settling" in result.stderr
    assert "Until stable: 1000 passes acted, then stopped without settling; final cost $0.0416/h" in result.stdout


# -- --node: what the plan does to one node ------------------------------------------------------------------


def _two_pools() -> list[Any]:
    return [nodepool("a"), nodepool("b"), node("idle", pool="a"),
            node("busy", pool="b", itype="t3.medium"), pod("db", "busy", cpu="1800m")]


def test_node_cuts_the_json_to_that_node(runner: CliRunner, tmp_path: Path) -> None:
    path = _write(tmp_path, *_two_pools())
    whole = json.loads(runner.invoke(app, ["plan", "-f", path, "--now", NOW_ARG, "-o", "json"]).stdout)
    result = runner.invoke(app, ["plan", "-f", path, "--now", NOW_ARG, "-o", "json", "--node", "busy"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["commands"] == []  # the pass's command (emptiness of idle) does not touch it
    assert out["blocked"] == [b for b in whole["blocked"] if b["node"] == "busy"] != []
    assert {b["nodePool"] for b in out["budgets"]} == {"b"}
    assert out["cost"] == whole["cost"]  # the pass's, not the node's
    idle = json.loads(runner.invoke(app, ["plan", "-f", path, "--now", NOW_ARG, "-o", "json",
                                          "--node", "idle"]).stdout)
    assert idle["commands"] == whole["commands"] and idle["blocked"] == []
    assert {b["nodePool"] for b in idle["budgets"]} == {"a"}


def test_an_unknown_node_exits_2_and_names_the_close_ones(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["plan", "-f", _write(tmp_path, *_two_pools()), "--now", NOW_ARG,
                                 "--node", "busy", "--node", "bussy"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "--node: no Node of that name in the input (2 nodes): bussy (did you mean busy?)" in result.stderr


def test_node_table_says_what_this_pass_and_the_steps_do_to_it(runner: CliRunner, tmp_path: Path) -> None:
    docs = [nodepool(budgets=[{"nodes": "1"}]), node("e1"), node("e2"),
            node("busy", itype="t3.medium"), pod("db", "busy", cpu="1800m")]
    result = runner.invoke(app, ["plan", "-f", _write(tmp_path, *docs), "--now", NOW_ARG, "--until-stable",
                                 "--node", "e1", "--node", "e2", "--node", "busy"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    lines = {line.split(" ", 1)[0]: line for line in result.stdout.splitlines() if line.startswith(("e1", "e2", "bu"))}
    gone, waiting = sorted(("e1", "e2"), key=lambda n: "disrupted this pass" not in lines[n])
    assert lines[gone] == f"{gone} (NodePool default): disrupted this pass by emptiness (delete)"
    assert lines[waiting].startswith(f"{waiting} (NodePool default): stays this pass: empty, but the Empty budget")
    assert lines[waiting].endswith("; until stable: disrupted at step 2 of 3 (15s on) by emptiness (delete)")
    assert lines["busy"].startswith("busy (NodePool default): stays this pass: ")
    assert lines["busy"].endswith("; until stable: never disrupted (3 steps)")
    assert "Commands that disrupt these nodes" in result.stdout and "Until stable:" not in result.stdout


# -- --live: the cluster itself (the real apiserver: tests/integration/test_plan_live.py) ---------------------


def test_a_plan_needs_one_source(runner: CliRunner, tmp_path: Path) -> None:
    neither = runner.invoke(app, ["plan"])
    assert neither.exit_code == 2 and neither.stdout == ""
    assert "error: give -f FILE (a kubectl dump; - for stdin) or --live (read the cluster)" in neither.stderr
    both = runner.invoke(app, ["plan", "-f", _write(tmp_path, *_cluster()), "--live"])
    assert both.exit_code == 2 and both.stdout == ""
    assert "error: give either -f FILE (a kubectl dump) or --live (read the cluster), not both" in both.stderr


def _kubeconfig(tmp_path: Path, server: str) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": server}}], "users": [{"name": "u", "user": {}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}), encoding="utf-8")
    return str(path)


def test_a_cluster_that_cannot_be_read_exits_2_saying_why(runner: CliRunner, tmp_path: Path) -> None:
    kubeconfig = _kubeconfig(tmp_path, "https://127.0.0.1:1")  # nothing listens on port 1
    refused = runner.invoke(app, ["plan", "--live", "--kubeconfig", kubeconfig])
    assert refused.exit_code == 2 and refused.stdout == ""
    assert "error: --live: cannot list nodes at https://127.0.0.1:1: " in refused.stderr, refused.stderr
    no_context = runner.invoke(app, ["plan", "--kubeconfig", kubeconfig, "--context", "nowhere"])  # implies --live
    assert no_context.exit_code == 2
    assert f"error: --live: cannot use {kubeconfig}: " in no_context.stderr and "nowhere" in no_context.stderr
    missing = runner.invoke(app, ["plan", "--live", "--kubeconfig", str(tmp_path / "none")])
    assert missing.exit_code == 2
    assert f"error: --live: cannot use {tmp_path / 'none'}: no such file" in missing.stderr


@pytest.mark.parametrize("command", [["run", "--duration", "1m"], ["backtest", "--trace", "batch-bursts",
                                                                    "--duration", "1m", "-j", "1"]])
def test_run_and_backtest_read_the_cluster_with_live_too(runner: CliRunner, tmp_path: Path,
                                                         command: list[str]) -> None:
    both = runner.invoke(app, [*command, "-f", _write(tmp_path, *_cluster()), "--live"])
    assert both.exit_code == 2 and both.stdout == ""
    assert "error: give either -f FILE (a kubectl dump) or --live (read the cluster), not both" in both.stderr
    refused = runner.invoke(app, [*command, "--kubeconfig", _kubeconfig(tmp_path, "https://127.0.0.1:1")])
    assert refused.exit_code == 2 and refused.stdout == ""
    assert "error: --live: cannot list nodes at https://127.0.0.1:1: " in refused.stderr, refused.stderr


def test_conflicts_with_karpenter_are_warnings_and_refuse_the_nodepool(runner: CliRunner, tmp_path: Path) -> None:
    """With the karpenter provider, a NodePool whose own budgets and expiry still let Karpenter disrupt is a conflict:
    a line above the tables, warnings[] in JSON, and with ``--mode enforce`` none of its nodes disrupted (each says
    why)."""
    path = _write(tmp_path, nodepool(budgets=None), node("idle"), nodeclaim("claim-idle", "idle", expire_after="Never"))
    as_json = runner.invoke(app, ["plan", "-f", path, "--now", NOW_ARG, "-o", "json", "--provider", "karpenter",
                                  "--mode", "enforce"])
    assert as_json.exit_code == 0, as_json.output
    out = json.loads(as_json.stdout)
    assert [(w["kind"], w["nodePool"]) for w in out["warnings"]] == [("KarpenterBudgets", "default"),
                                                                      ("KarpenterExpiry", "default")]
    assert out["commands"] == []
    [idle] = out["blocked"]
    assert idle["reason"] == "ebb disrupts no node of NodePool default until this conflict is fixed: " \
        + out["warnings"][0]["message"]
    table = runner.invoke(app, ["plan", "-f", path, "--now", NOW_ARG, "--provider", "karpenter"])
    assert table.exit_code == 0, table.output
    lines = [line for line in table.stdout.splitlines() if line.startswith("conflict (")]
    assert [line.split(")", 1)[0] for line in lines] == ["conflict (KarpenterBudgets", "conflict (KarpenterExpiry"]
    # without Karpenter (no provider karpenter, no NodeClaim) the same NodePool is ebb's alone
    plain = runner.invoke(app, ["plan", "-f", _write(tmp_path, nodepool(budgets=None), node("idle"), name="b.yaml"),
                                "--now", NOW_ARG, "-o", "json"])
    assert json.loads(plain.stdout)["warnings"] == [] and json.loads(plain.stdout)["commands"]


def _first_command(runner: CliRunner, path: Path, *extra: str) -> dict[str, Any]:
    """The first command of ``ebb plan -f PATH -o json`` with ``extra`` flags."""
    result = runner.invoke(app, ["plan", "-f", str(path), "--now", NOW_ARG, "-o", "json", *extra])
    assert result.exit_code == 0, result.output
    command: dict[str, Any] = json.loads(result.stdout)["commands"][0]
    return command


def test_max_replacements_lets_a_merge_launch_several_nodes(runner: CliRunner, tmp_path: Path) -> None:
    """Six $1.00 nodes of 2 cpu with a 1300m pod each, where the largest type (4 cpu, $1.50/h) holds three of the
    pods: with Karpenter's one replacement a command merges three nodes; with --max-replacements 2 one command takes
    all six onto two nodes."""
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(repack_cluster(), sort_keys=False), encoding="utf-8")
    one, several = _first_command(runner, path), _first_command(runner, path, "--max-replacements", "2")
    assert (len(one["nodes"]), len(one["replacements"])) == (3, 1)
    assert (len(several["nodes"]), len(several["replacements"])) == (6, 2)
    refused = runner.invoke(app, ["plan", "-f", str(path), "--max-replacements", "0"])
    assert refused.exit_code == 2


def test_search_optimizer_chooses_the_set_that_saves_most_within_the_budget(runner: CliRunner, tmp_path: Path) -> None:
    """A budget of two nodes: the greedy search takes the first two candidates that fit (two $1.00 nodes), the
    optimizer the two that save most ($4.00 each); a search it does not know is refused."""
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(budget_bound_cluster(), sort_keys=False), encoding="utf-8")
    greedy, optimizer = _first_command(runner, path), _first_command(runner, path, "--search", "optimizer")
    assert (greedy["nodes"], greedy["savingsPerHour"]) == (["a1", "a2"], 2.0)
    assert (sorted(optimizer["nodes"]), optimizer["savingsPerHour"]) == (["b1", "b2"], 8.0)
    assert "the optimizer's choice among 5 candidates" in optimizer["explanation"]
    refused = runner.invoke(app, ["plan", "-f", str(path), "--search", "best"])
    assert refused.exit_code == 2
