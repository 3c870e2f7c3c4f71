"""ebb.adapters.kube.client: every ebb service's ApiClient names the service in its User-Agent, so the API
server's audit log tells which ebb component sent a request (tests/integration/test_karpenter_system.py
checks ebb's writes next to Karpenter by it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ebb import __version__
from ebb.adapters.kube.client import kube_client, user_agent

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "http://127.0.0.1:1"}
users:
- name: local
  user: {}
contexts:
- name: local
  context: {cluster: local, user: local}
current-context: local
"""


@pytest.mark.parametrize(("component", "expected"), [
    ("ebb-termination-executor", f"ebb-termination-executor/{__version__}"),
    ("ebb-cluster-watcher", f"ebb-cluster-watcher/{__version__}"),
    (None, f"ebb/{__version__}"),
])
async def test_the_client_sends_the_components_user_agent(tmp_path: Path, component: str | None,
                                                          expected: str) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    client = kube_client(str(path)) if component is None else kube_client(str(path), component=component)
    async with client as api:
        assert api.user_agent == expected
        assert api.default_headers["User-Agent"] == expected
        assert api.configuration.host == "http://127.0.0.1:1"
    if component is not None:
        assert user_agent(component) == expected
