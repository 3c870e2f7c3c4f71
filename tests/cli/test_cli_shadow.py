"""`ebb shadow report` (docs/cli.md, docs/shadow.md): the report asked of a real decisions-api (uvicorn in a thread,
on a SQLite store holding what a shadow planner kept; tests/kit/shadow_api.py), in words and as the API's JSON; a
period that is none, no ``--api``, a refused token and a ``--report`` file that cannot be written exit 2, an API
that does not answer exits 1. The HTML page's content is tests/browser/test_shadow_report_browser.py's."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ebb.adapters.store.decision_store import DecisionStore
from ebb.adapters.store.migrate import upgrade_async
from ebb_cli.main import app
from tests.kit.builders import NOW, disruption_policy, proposed
from tests.kit.cli import said
from tests.kit.shadow_api import recording, removal, served

TOKEN = "shadow-test-token"
T0 = datetime(2026, 11, 20, tzinfo=UTC)
END = T0 + timedelta(hours=10)


async def _fill(url: str) -> None:
    """A shadow planner's record: s1 approved (n1, Karpenter kept it); Karpenter removed n3 (ebb: a PDB)."""
    await upgrade_async(url)
    store = DecisionStore.from_url(url, "c", shadow=True)
    try:
        await store.propose(proposed("s1", "n1", now=T0 + timedelta(hours=1), savings=0.5))
        await store.approve("s1", node_pools={"n1": "default"}, reason="Empty", allowed={"default": 1}, counted=(),
                            now=T0 + timedelta(hours=2))
        await store.record_removal(removal("n3", T0 + timedelta(hours=5), verdict="pdb-blocks",
                                           verdict_text="n3: PodDisruptionBudget default/web allows no disruption"))
    finally:
        await store.close()


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = f"sqlite:///{tmp_path_factory.mktemp('shadow') / 'ebb.db'}"
    asyncio.run(_fill(url))
    with served(url, token=TOKEN, now=END) as api:
        yield api


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["shadow", "report", *args])


def test_the_report_in_words_and_as_json(api: str) -> None:
    as_json = _invoke("--api", api, "--token", TOKEN, "--since", "1d", "-o", "json")
    assert as_json.exit_code == 0, as_json.output
    report = json.loads(as_json.stdout)
    assert report["counts"]["karpenterOnly"] == 1 and report["counts"]["ebbOnly"] == 1
    assert report["ebbOnly"][0]["saved"] == pytest.approx(0.5 * 8)
    words = _invoke("--api", api, "--token", TOKEN, "--since", "1d")
    assert words.exit_code == 0, words.output
    text = words.stdout
    assert "Karpenter removed 1 node(s): ebb would have disrupted 0 of them too, 1 not." in text
    assert "saving 0.5000/h, 4.0000 over the period" in text
    assert "why ebb would have left Karpenter's removals alone: pdb 1" in text
    [n3] = [line for line in text.splitlines() if line.startswith("n3 ")]
    assert "Underutilized" in n3 and "pdb" in n3 and "PodDisruptionBudget default/web" in n3
    [s1] = [line for line in text.splitlines() if line.startswith("s1 ")]
    assert "n1" in s1 and "4.0000" in s1
    # a period that holds nothing of it
    empty = _invoke("--api", api, "--token", TOKEN, "--since", "1h", "--until", "2026-11-20T00:30:00Z",
                    "-o", "json")
    assert empty.exit_code == 0 and json.loads(empty.stdout)["counts"]["shadowDecisions"] == 0


@pytest.mark.parametrize(("args", "code"), [
    (["--since", "a week", "--api", "http://127.0.0.1:1"], 2),
    (["--since", "7d"], 2),
])
def test_bad_input_exits_2(args: list[str], code: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EBB_API_URL", raising=False)
    assert _invoke(*args).exit_code == code


def test_a_refused_token_exits_2_and_an_api_that_does_not_answer_exits_1(api: str) -> None:
    refused = _invoke("--api", api, "--token", "wrong")
    assert refused.exit_code == 2 and "answered 401" in said(refused.output)
    away = _invoke("--api", "http://127.0.0.1:1", "--token", TOKEN)
    assert away.exit_code == 1 and "cannot ask" in away.output


def test_help_names_the_verb() -> None:
    assert "report" in CliRunner().invoke(app, ["shadow", "--help"]).stdout


def test_the_back_test_of_the_recorded_period(api: str, tmp_path: Path) -> None:
    path = recording(tmp_path / "recorded.yaml")
    result = _invoke("--api", api, "--token", TOKEN, "--since", "1d", "--trace", str(path), "-o", "json")
    assert result.exit_code == 0, result.output
    tested = json.loads(result.stdout)["backtest"]
    assert tested["durationSeconds"] == 3600.0 and tested["start"] == NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
    baseline, ours = tested["policies"]
    assert (baseline["name"], ours["name"]) == ("karpenter-default", "recorded policies")
    # the same run as ebb backtest's, under the recording's own policy file
    policy = tmp_path / "policy.yaml"
    policy.write_text(json.dumps(disruption_policy("default", consolidationPolicy="WhenEmptyOrUnderutilized",
                                                   consolidateAfter="0s", budgets=[{"nodes": "100%"}])))
    direct = CliRunner().invoke(app, ["backtest", "--trace", str(path), "--policy", str(policy), "-o", "json",
                                      "-j", "1"])
    assert direct.exit_code == 0, direct.output
    runs = {run["name"]: run["summary"] for run in json.loads(direct.stdout)["policies"]}
    assert baseline["cost"] == runs["karpenter-default"]["node_hours_cost"]
    assert ours["cost"] == runs["policy"]["node_hours_cost"] and ours["evictions"] == runs["policy"]["evictions"]
    words = _invoke("--api", api, "--token", TOKEN, "--since", "1d", "--trace", str(path))
    assert words.exit_code == 0 and "Back-test of the recorded period" in words.stdout
    # a trace that is no recording, and a policy without a trace
    builtin = _invoke("--api", api, "--token", TOKEN, "--trace", "diurnal")
    assert builtin.exit_code == 2
    assert _invoke("--api", api, "--token", TOKEN, "--policy", str(policy)).exit_code == 2


def test_the_page_is_written_after_the_words_and_an_unwritable_one_is_refused_first(api: str, tmp_path: Path) -> None:
    page = tmp_path / "shadow.html"
    result = _invoke("--api", api, "--token", TOKEN, "--since", "1d", "--report", str(page))
    assert result.exit_code == 0, result.output
    assert "Shadow report from" in result.stdout and f"report: {page}" in result.stderr
    text = page.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "PodDisruptionBudget default/web" in text and ">s1<" in text
    # the file is checked before the API is asked (which does not answer here: that would exit 1)
    nowhere = _invoke("--api", "http://127.0.0.1:1", "--token", TOKEN, "--report", str(tmp_path / "no" / "x.html"))
    assert nowhere.exit_code == 2 and "does not exist" in said(nowhere.output), nowhere.output
