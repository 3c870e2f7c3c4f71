"""docker-compose.yml's profile "system" and the Dockerfile, checked without a Docker engine: every ebb
service runs an existing module, every variable it sets is a setting of that service and parses, the
files it mounts exist, and the image is the one the Kubernetes manifests run."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic_settings import BaseSettings

REPO = Path(__file__).resolve().parents[2]
SERVICES = {
    "cluster-watcher": "ebb_cluster_watcher",
    "consolidation-planner": "ebb_consolidation_planner",
    "termination-executor": "ebb_termination_executor",
    "interruption-ingester": "ebb_interruption_ingester",
    "decisions-api": "ebb_decisions_api",
}


def compose() -> dict[str, Any]:
    loaded = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def expand(value: str) -> str:
    """``${NAME:-default}`` → default (what compose uses when NAME is not set)."""
    while "${" in value:
        start = value.index("${")
        end = value.index("}", start)
        inner = value[start + 2:end]
        value = value[:start] + (inner.split(":-", 1)[1] if ":-" in inner else "") + value[end + 1:]
    return value


def test_the_five_services_and_the_migrations_are_in_the_system_profile() -> None:
    services = compose()["services"]
    system = {name for name, svc in services.items() if "system" in (svc.get("profiles") or [])}
    assert set(SERVICES) | {"migrate", "moto-queue"} == system
    # the servers stay outside the profile: `make up` starts only them
    assert {"kafka", "postgres", "kwok", "moto"} <= {n for n, s in services.items() if not s.get("profiles")}


@pytest.mark.parametrize(("name", "package"), sorted(SERVICES.items()))
def test_each_service_runs_its_module_with_settings_it_has(name: str, package: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    svc = compose()["services"][name]
    assert svc["command"] == ["python", "-m", package]
    assert importlib.util.find_spec(f"{package}.__main__") is not None
    settings_cls = importlib.import_module(f"{package}.settings").Settings
    assert issubclass(settings_cls, BaseSettings)
    prefix = str(settings_cls.model_config.get("env_prefix", ""))
    env = {k: expand(str(v)) for k, v in (svc.get("environment") or {}).items()}
    ours = {k: v for k, v in env.items() if k.startswith("EBB_")}
    fields = {f"{prefix}{f}".upper() for f in settings_cls.model_fields}
    assert set(ours) <= fields, f"{name} sets what its Settings do not have: {set(ours) - fields}"
    for key in list(os.environ):
        if key.startswith(prefix):
            monkeypatch.delenv(key)
    for key, value in ours.items():
        monkeypatch.setenv(key, value)
    settings = settings_cls()
    if any(k.endswith("_KAFKA_BOOTSTRAP") for k in ours):
        assert settings.kafka_bootstrap == "kafka:19092"  # the broker's listener on the compose network
    if "kubeconfig" in settings_cls.model_fields:
        assert settings.kubeconfig == "/etc/ebb/kubeconfig.yaml"
    depends = svc.get("depends_on") or {}
    if any(k.endswith("_DATABASE_URL") for k in ours):
        assert depends.get("migrate") == {"condition": "service_completed_successfully"}


def test_the_migrations_run_ebb_db_upgrade_against_the_compose_database() -> None:
    migrate = compose()["services"]["migrate"]
    assert migrate["command"] == ["ebb", "db", "upgrade"]
    assert migrate["environment"]["EBB_DATABASE_URL"].endswith("@postgres:5432/ebb")
    assert migrate["depends_on"]["postgres"] == {"condition": "service_healthy"}


def test_mounted_files_exist_and_the_kubeconfig_points_at_the_kwok_container() -> None:
    for name in SERVICES:
        for volume in compose()["services"][name].get("volumes") or []:
            source = volume.split(":", 1)[0]
            assert (REPO / source).is_file(), f"{name} mounts {source}, which does not exist"
    kubeconfig = yaml.safe_load((REPO / "deploy/compose/kubeconfig.internal.yaml").read_text())
    assert kubeconfig["clusters"][0]["cluster"]["server"] == "http://kwok:8080"


def test_the_image_is_built_from_files_that_exist_and_is_the_manifests_image() -> None:
    dockerfile = (REPO / "Dockerfile").read_text().splitlines()
    for line in dockerfile:
        if line.startswith("COPY ") and not line.startswith("COPY --from="):  # not another stage's or image's
            for source in line.split()[1:-1]:
                assert (REPO / source).exists(), f"the Dockerfile copies {source}, which does not exist"
    image = compose()["services"]["cluster-watcher"]["image"]
    manifest = (REPO / "deploy/kubernetes/services/cluster-watcher.yaml").read_text()
    assert f"image: {image}" in manifest


def test_the_image_copies_every_workspace_member_and_its_ebb_command_is_the_cli_package() -> None:
    """`uv sync --frozen` in the image installs the whole workspace, so the Dockerfile must copy every member's
    directory; the `ebb` the migrations run (`ebb db upgrade`) is the console script of apps/cli."""
    members = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["uv"]["workspace"]["members"]
    copied = {line.split()[1] for line in (REPO / "Dockerfile").read_text().splitlines()
              if line.startswith("COPY ") and len(line.split()) == 3}
    for member in members:
        top = member.split("/", 1)[0]
        assert top in copied or member in copied, f"the Dockerfile does not copy the workspace member {member}"
    (ebb,) = importlib.metadata.entry_points(group="console_scripts", name="ebb")
    assert ebb.value == "ebb_cli.main:app"
    assert ebb.dist is not None and ebb.dist.name == "ebb-cli"
