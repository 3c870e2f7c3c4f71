"""`ebb explain NODE --api URL` (docs/cli.md): the running system's answer, asked of the decisions-api that
``ebb run --api-port`` serves (a real server in a subprocess, on the bundled example), in words and as the API's
document; a node it does not know and a refused token exit 2, an API that does not answer exits 1."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from ebb_cli.main import app

EBB = str(Path(sys.executable).parent / "ebb")
TOKEN = "explain-test-token"
#: how long the embedded run may take to serve a first planner pass (real seconds)
READY_SECONDS = 90.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def api() -> Iterator[str]:
    port = _free_port()
    run = subprocess.Popen([EBB, "run", "--speed", "60", "--duration", "2h", "--api-port", str(port),
                            "--api-token", TOKEN], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        run.terminate()
        run.wait(timeout=30)


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def _a_node(api: str) -> list[str]:
    """Two nodes of the leader planner's pass, once the run has published one."""
    import urllib.request

    deadline = time.monotonic() + READY_SECONDS
    while True:
        try:
            request = urllib.request.Request(f"{api}/v1/plan", method="POST",
                                             headers={"Authorization": f"Bearer {TOKEN}"})
            with urllib.request.urlopen(request, timeout=10) as response:
                plan = json.loads(response.read())
            names: list[str] = [b["node"] for b in plan["blocked"][:2]]
            if _invoke("explain", *names, "--api", api, "--token", TOKEN).exit_code == 0:
                return names
        except OSError:
            pass
        assert time.monotonic() < deadline, "the embedded run served no planner pass"
        time.sleep(0.5)


def test_explain_asks_the_running_system(api: str) -> None:
    name, other = _a_node(api)
    as_json = _invoke("explain", name, "--api", api, "--token", TOKEN, "-o", "json")
    assert as_json.exit_code == 0, as_json.output
    answer = json.loads(as_json.stdout)
    assert answer["node"] == name
    assert answer["source"] == "planner-pass"
    words = _invoke("explain", name, "--api", api, "--token", TOKEN)
    assert words.exit_code == 0, words.output
    first = words.stdout.splitlines()[0]
    assert first.startswith(f"{name} (NodePool {answer['nodePool']}): ")
    assert "from: the leader planner's pass at " in words.stdout
    # the system runs on between the two questions: the node is left alone for a cause, or being disrupted
    assert "  cause: " in words.stdout or "  being disrupted by decision " in words.stdout
    both = _invoke("explain", name, other, "--api", api, "--token", TOKEN, "-o", "yaml")
    assert both.exit_code == 0, both.output
    listed = yaml.safe_load(both.stdout)
    assert listed["kind"] == "List"
    assert [item["node"] for item in listed["items"]] == [name, other]


def test_explain_api_errors(api: str) -> None:
    _a_node(api)
    unknown = _invoke("explain", "no-such-node", "--api", api, "--token", TOKEN)
    assert unknown.exit_code == 2
    assert "404" in unknown.output and "no-such-node" in unknown.output
    refused = _invoke("explain", "no-such-node", "--api", api, "--token", "wrong")
    assert refused.exit_code == 2
    assert "401" in refused.output
    gone = _invoke("explain", "a-node", "--api", f"http://127.0.0.1:{_free_port()}")
    assert gone.exit_code == 1
    assert "cannot ask" in gone.output
    mixed = _invoke("explain", "a-node", "--api", api, "--until-stable")
    assert mixed.exit_code == 2
    assert "--until-stable" in mixed.output
    repack = _invoke("explain", "a-node", "--api", api, "--max-replacements", "2")
    assert repack.exit_code == 2 and "--max-replacements" in repack.output
    searched = _invoke("explain", "a-node", "--api", api, "--search", "optimizer")
    assert searched.exit_code == 2 and "--search" in searched.output
