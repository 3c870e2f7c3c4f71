"""What the integration tests get from their servers (tests/integration/conftest.py starts them): the address of
each one, as the session fixtures ``kafka_server``, ``postgres_server``, ``kubernetes_cluster`` and ``aws_endpoint``
return it, and the ``Infra`` that started them. A test names these types in its fixtures' annotations; they live
here, not in the conftest, so that no test imports a conftest."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

#: the repository's root (deploy/local's scripts, the manifests under deploy/kubernetes)
REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class KafkaServer:
    bootstrap: str


@dataclass(frozen=True)
class PostgresServer:
    #: postgresql+asyncpg://...
    url: str


@dataclass(frozen=True)
class KubernetesCluster:
    kubeconfig: Path


@dataclass(frozen=True)
class AwsEndpoint:
    endpoint_url: str
    region: str = "us-east-1"
    access_key_id: str = "testing"
    secret_access_key: str = "testing"


class Infra(Protocol):
    kind: str

    def prepare(self, components: Iterable[str]) -> None: ...

    def settings(self, component: str) -> dict[str, str]: ...

    def close(self, *, keep_state: bool) -> None: ...
