"""`ebb plan` on a NodePool requirement with `Gte` or `Lte` (Karpenter v1.10's integer operators): read, and an
invalid bound refused as an input error (exit 2) naming the document and the field. The rules themselves are
tests/unit/test_integer_operators.py's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from ebb_cli.main import app
from tests.kit.builders import labelled_catalog, node, nodepool

CPU = "karpenter.k8s.aws/instance-cpu"
ON_DEMAND = {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}


def _req(key: str, operator: str, *values: Any) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


# -- `ebb plan`: a Gte or Lte requirement is no longer an input error -------------------------------------------------

@pytest.mark.parametrize(("requirement", "exit_code"), [
    (_req(CPU, "Gte", "4"), 0),
    (_req(CPU, "Lte", "8"), 0),
    (_req(CPU, "Gte", "-1"), 2),
    (_req(CPU, "Lte", "four"), 2),
    (_req(CPU, "Gte"), 2),
])
def test_ebb_plan_reads_gte_and_lte(tmp_path: Path, requirement: dict[str, Any], exit_code: int) -> None:
    path = tmp_path / "cluster.yaml"
    docs = [nodepool(requirements=[ON_DEMAND, requirement]), node("idle", labels={CPU: "4"}), labelled_catalog()]
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")
    result = CliRunner().invoke(app, ["plan", "-f", str(path), "--now", "2026-11-23T18:30:00Z", "-o", "json"])
    assert result.exit_code == exit_code, result.output
    if exit_code == 0:
        out = json.loads(result.stdout)
        assert [(c["method"], c["nodes"]) for c in out["commands"]] == [("emptiness", ["idle"])]
    else:
        assert result.stdout == ""
        assert "NodePool default" in result.stderr
        assert "spec.template.spec.requirements[1].values" in result.stderr
