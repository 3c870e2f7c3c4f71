"""The cluster-wide engine options where the services find them (ebb.adapters.engine_options): a mounted ConfigMap
directory, a YAML file, or nothing (the services' own settings stand); the planner's passes, the decisions-api's live
plans and the embedded mode all take them, so every pass of the cluster runs with one set of options."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from pydantic import SecretStr
from typer.testing import CliRunner

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.engine_options import read_engine_options
from ebb.adapters.store.decision_store import DecisionStore
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, ClusterObject
from ebb.core.conflicts import ConflictSettings
from ebb.core.methods.base import EngineOptions
from ebb.core.options import EngineOptionsError
from ebb_cli.main import app as cli
from ebb_consolidation_planner.app import engine_options as planner_engine_options
from ebb_consolidation_planner.settings import Settings as PlannerSettings
from ebb_decisions_api.app import create_app
from ebb_decisions_api.settings import Settings as ApiSettings
from ebb_embedded.runner import EmbeddedOptions
from ebb_embedded.runner import engine_options as embedded_engine_options
from ebb_termination_executor.app import with_configured_provider
from ebb_termination_executor.settings import Settings as ExecutorSettings
from tests.kit.builders import NOW, catalog, node, nodepool, ts

TOKEN = "options-test-token"


def mounted(tmp_path: Path, data: dict[str, str]) -> Path:
    """A directory as the kubelet mounts a ConfigMap: the keys are links into a hidden timestamped directory,
    next to its ``..data`` link."""
    root = tmp_path / "engine-options"
    stamped = root / "..2026_01_01_00_00_00.000000001"
    stamped.mkdir(parents=True)
    for key, value in data.items():
        (stamped / key).write_text(value)
    (root / "..data").symlink_to(stamped.name)
    for key in data:
        (root / key).symlink_to(Path("..data") / key)
    return root


def test_a_mounted_configmap_sets_the_options_over_the_defaults(tmp_path: Path) -> None:
    path = mounted(tmp_path, {"spotToSpot": "true\n", "provider": "karpenter"})
    defaults = EngineOptions(explain=False)
    assert read_engine_options(path, defaults) == EngineOptions(spot_to_spot=True, require_nodeclaim=True,
                                                                explain=False)


def test_a_yaml_file_holds_the_configmap_or_its_data(tmp_path: Path) -> None:
    configmap = tmp_path / "configmap.yaml"
    configmap.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap",
                                         "metadata": {"name": "ebb-engine-options"}, "data": {"explain": "false"}}))
    assert read_engine_options(configmap, EngineOptions()) == EngineOptions(explain=False)
    plain = tmp_path / "options.yaml"
    plain.write_text("spotToSpot: true\n")
    assert read_engine_options(str(plain), EngineOptions()) == EngineOptions(spot_to_spot=True)


def test_no_object_leaves_the_services_own_settings(tmp_path: Path) -> None:
    mine = EngineOptions(spot_to_spot=True)
    assert read_engine_options(tmp_path / "absent", mine) is mine
    assert read_engine_options("", mine) is mine
    assert read_engine_options(None, mine) is mine


def test_a_bad_object_is_an_error_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(EngineOptionsError, match="provider: 'gke'"):
        read_engine_options(mounted(tmp_path, {"provider": "gke"}), EngineOptions())
    broken = tmp_path / "broken.yaml"
    broken.write_text("- spotToSpot\n")
    with pytest.raises(EngineOptionsError, match="must hold a ConfigMap or a mapping"):
        read_engine_options(broken, EngineOptions())


def test_the_planner_and_the_embedded_mode_read_the_object_over_their_settings(tmp_path: Path) -> None:
    path = mounted(tmp_path, {"provider": "karpenter"})
    settings = PlannerSettings(engine_options=str(path), spot_to_spot=True, explain=False)
    # the planner refuses a NodePool that conflicts with Karpenter (its mode is enforce)
    assert planner_engine_options(settings) == EngineOptions(spot_to_spot=True, explain=False,
                                                             require_nodeclaim=True,
                                                             refuse_conflicts=ConflictSettings("karpenter", True))
    # without the object: the settings, as before it existed
    assert planner_engine_options(PlannerSettings(engine_options=str(tmp_path / "absent"), provider="karpenter")) == \
        EngineOptions(require_nodeclaim=True, refuse_conflicts=ConflictSettings("karpenter", True))
    # the embedded mode's planner checks no conflicts (its cluster is simulated), as its API's options
    embedded = EmbeddedOptions(start=NOW, spot_to_spot=True, engine_options=path)
    assert embedded_engine_options(embedded) == planner_engine_options(PlannerSettings(
        engine_options=str(path), spot_to_spot=True, check_conflicts=False))


async def test_the_apis_live_plan_takes_the_object(tmp_path: Path, store: DecisionStore) -> None:
    """provider karpenter in the object: a node without a NodeClaim is not a candidate in a live plan, though the
    API's own setting says none."""
    bus = InMemoryBus()
    docs: list[dict[str, Any]] = [catalog(), nodepool(), node("idle")]
    for doc in docs:
        await bus.publish(TOPIC_CLUSTER_OBJECTS, ClusterObject(kind=doc["kind"], namespace="",
                                                               name=doc["metadata"]["name"], resource_version="1",
                                                               object=doc))
    path = mounted(tmp_path, {"provider": "karpenter"})
    app = create_app(ApiSettings(token=SecretStr(TOKEN), database_url="sqlite://", cluster=store.cluster,
                                 engine_options=str(path), provider="none"), store, bus=bus, clock=lambda: NOW)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
        for _ in range(250):
            response = await client.post("/v1/plan", params={"now": ts(NOW)}, headers=auth)
            if response.status_code != 503:
                break
            await asyncio.sleep(0.02)
    plan = response.json()
    assert response.status_code == 200, plan
    assert plan["commands"] == []
    assert [b["reason"] for b in plan["blocked"]] == [
        "it has no NodeClaim: with the karpenter provider ebb retires nodes by deleting their NodeClaim"]


def test_ebb_run_refuses_a_bad_options_object_before_the_run(tmp_path: Path) -> None:
    bad = tmp_path / "options.yaml"
    bad.write_text("kind: ConfigMap\ndata:\n  spotToSpot: maybe\n")
    for path, said in ((bad, "spotToSpot: 'maybe' is not true or false"),
                       (tmp_path / "absent.yaml", "no such file or directory")):
        result = CliRunner().invoke(cli, ["run", "--duration", "1m", "--engine-options", str(path)])
        assert result.exit_code == 2, result.output
        assert "--engine-options" in result.output and said in " ".join(result.output.replace("│", " ").split())


def test_the_executor_takes_its_provider_from_the_object(tmp_path: Path) -> None:
    """The termination-executor retires nodes by the provider the planner planned for: the object's, over its own
    PROVIDER; without the object, or where it names none, its own setting stands."""
    own = ExecutorSettings(provider="none", engine_options=str(mounted(tmp_path / "a", {"provider": "karpenter"})))
    assert with_configured_provider(own).provider == "karpenter"
    unnamed = ExecutorSettings(provider="kwok", engine_options=str(mounted(tmp_path / "b", {"explain": "true"})))
    assert with_configured_provider(unnamed).provider == "kwok"
    missing = ExecutorSettings(provider="kwok", engine_options=str(tmp_path / "nothing-here"))
    assert with_configured_provider(missing) is missing
    bad = ExecutorSettings(engine_options=str(mounted(tmp_path / "c", {"provider": "aws"})))
    with pytest.raises(EngineOptionsError, match="provider"):
        with_configured_provider(bad)
