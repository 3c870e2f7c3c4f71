"""A service process and its signals (``ebb.adapters.service``): the first SIGTERM or SIGINT asks the service to
stop; one that does not return within the grace, or a second signal, is cancelled. A service started while
Kafka is down waits for it without watching its stop: before, SIGTERM and Ctrl-C left it running for good."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from ebb.adapters.service import stopped_by_signals


async def test_a_service_that_stops_when_asked_is_not_cancelled() -> None:
    stopped: list[str] = []

    async def service(stop: asyncio.Event) -> None:
        await stop.wait()
        stopped.append("gracefully")

    running = asyncio.ensure_future(stopped_by_signals(service, grace=5))
    await asyncio.sleep(0.05)
    os.kill(os.getpid(), signal.SIGTERM)
    await asyncio.wait_for(running, 5)
    assert stopped == ["gracefully"]


@pytest.mark.parametrize(("signals", "grace", "why"), [
    ([signal.SIGTERM], 0.2, "still running 0.2 s after SIGTERM"),
    ([signal.SIGINT, signal.SIGINT], 60, "a second signal (SIGINT)"),
])
async def test_a_service_that_does_not_stop_is_cancelled(signals: list[signal.Signals], grace: float,
                                                          why: str) -> None:
    cleaned: list[str] = []

    async def deaf(stop: asyncio.Event) -> None:
        try:
            await asyncio.sleep(3600)  # a wait that does not watch stop
        finally:
            cleaned.append("clean-up ran")

    with capture_logs() as logged:
        running = asyncio.ensure_future(stopped_by_signals(deaf, grace=grace))
        await asyncio.sleep(0.05)
        for signum in signals:
            os.kill(os.getpid(), signum)
            await asyncio.sleep(0.05)
        await asyncio.wait_for(running, 5)  # ends quietly: no CancelledError out of it
    assert cleaned == ["clean-up ran"]
    assert [(e["event"], e.get("why")) for e in logged if e["log_level"] == "warning"] == [
        ("the service did not stop in time; cancelling it", why)]


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_planner_waiting_for_kafka_ends_on_a_signal(tmp_path: Path, signum: int) -> None:
    """The real service process: nothing listens on its Kafka port, so it waits for Kafka; a signal, then a second,
    ends it, with its clean-up run, well before the grace."""
    planner = Path(sys.executable).with_name("ebb-consolidation-planner")
    env = {**os.environ, "EBB_CONSOLIDATION_PLANNER_KAFKA_BOOTSTRAP": f"127.0.0.1:{_unused_port()}",
           "EBB_CONSOLIDATION_PLANNER_DATABASE_URL": f"sqlite:///{tmp_path / 'ebb.db'}"}
    # SIGINT's default restored (a test run started in the background may have it ignored, and the child would
    # inherit that)
    default_sigint = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                      "os.execv(sys.argv[1], sys.argv[1:])")
    process = subprocess.Popen([sys.executable, "-c", default_sigint, str(planner)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    try:
        for line in process.stdout:  # it is waiting for Kafka
            if "cannot be reached" in line:
                break
        else:
            pytest.fail("the planner ended before it waited for Kafka")
        process.send_signal(signum)
        time.sleep(0.5)
        assert process.poll() is None, "still waiting for Kafka: the first signal only asks it to stop"
        began = time.monotonic()
        process.send_signal(signum)
        code = process.wait(timeout=30)
        said = process.stdout.read()
    finally:
        if process.poll() is None:
            process.kill()
    assert code == 0
    assert time.monotonic() - began < 10
    assert "the service did not stop in time; cancelling it" in said
    assert "Traceback" not in said


@pytest.mark.parametrize(("service", "env", "said"), [
    ("ebb-termination-executor", {"EBB_TERMINATION_EXECUTOR_POLL_INTERVAL_SECONDS": "abc",
                                  "EBB_TERMINATION_EXECUTOR_METRICS_PORT": "99999"},
     ["error: EBB_TERMINATION_EXECUTOR_METRICS_PORT (given '99999'): Input should be less than or equal to 65535",
      "error: EBB_TERMINATION_EXECUTOR_POLL_INTERVAL_SECONDS (given 'abc'): Input should be a valid number"]),
    ("ebb-consolidation-planner", {"EBB_CONSOLIDATION_PLANNER_DEBOUNCE_SECONDS": "soon"},
     ["error: EBB_CONSOLIDATION_PLANNER_DEBOUNCE_SECONDS (given 'soon'): Input should be a valid number"]),
])
def test_invalid_settings_are_named_and_exit_2(service: str, env: dict[str, str], said: list[str]) -> None:
    """Each line names the environment variable, what it was given and what is wrong; no traceback."""
    done = subprocess.run([str(Path(sys.executable).with_name(service))], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == len(said)
    assert all(line.startswith(expected) for line, expected in zip(lines, said, strict=True)), lines
    assert "Traceback" not in done.stderr


def test_a_setting_that_may_hold_a_credential_is_named_without_its_value(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from pydantic_settings import BaseSettings, SettingsConfigDict

    from ebb.adapters.service import load_settings

    class Probe(BaseSettings):
        model_config = SettingsConfigDict(env_prefix="EBB_PROBE_")
        api_key: int = 0
        retries: int = 0

    monkeypatch.setenv("EBB_PROBE_API_KEY", "hunter2")
    monkeypatch.setenv("EBB_PROBE_RETRIES", "many")
    with pytest.raises(SystemExit) as ended:
        load_settings(Probe)
    assert ended.value.code == 2
    said = capsys.readouterr().err
    assert "error: EBB_PROBE_API_KEY: Input should be a valid integer" in said and "hunter2" not in said
    assert "error: EBB_PROBE_RETRIES (given 'many'): Input should be a valid integer" in said
