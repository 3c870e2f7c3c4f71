"""`ebb backtest --policy`: a policy file, or the built-in `karpenter-balanced` when no file of that name exists."""

from __future__ import annotations

from pathlib import Path

import pytest

from ebb_cli.backtest_cmd import load_policy


def test_the_built_in_karpenter_balanced_is_karpenter_default_under_balanced(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    policy = load_policy(Path("karpenter-balanced"))
    assert policy.name == "karpenter-balanced" and policy.source == "built in"
    (doc,) = policy.documents
    assert doc["metadata"]["name"] == "*"
    assert doc["spec"] == {"consolidationPolicy": "Balanced", "consolidateAfter": "0s",
                           "minimumSavingPerEvictedPod": 0, "budgets": [{"nodes": "10%"}]}  # any saving: Karpenter's
    assert policy.engine_options == {"karpenterPace": "true"}  # Karpenter's pace, as karpenter-default's


def test_a_file_of_that_name_is_the_policy_instead(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("karpenter-balanced").write_text(
        "apiVersion: ebb.sh/v1\nkind: DisruptionPolicy\nmetadata: {name: '*'}\nspec: {consolidateAfter: 5m}\n")
    policy = load_policy(Path("karpenter-balanced"))
    assert policy.source != "built in" and policy.documents[0]["spec"] == {"consolidateAfter": "5m"}
    assert policy.engine_options is None
