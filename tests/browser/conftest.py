"""Browser tests: what a person looks at, rendered in Debian's Chromium (``/usr/bin/chromium``) driven by
Playwright through pytest-playwright, headless; Playwright's own browser downloads are never used. Screenshots go
to ``$EBB_TEST_ARTIFACTS`` (default ``.artifacts/`` in the repository, ignored by git). Without Chromium the tests
are skipped, except under ``CI=true`` (``.ci/run`` installs it), where they fail."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def chromium_path() -> str | None:
    return os.environ.get("EBB_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    """pytest-playwright's launch arguments, pointed at the system's Chromium (run as root: no sandbox)."""
    executable = chromium_path()
    if executable is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed (.ci/run installs Debian's chromium)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return {**browser_type_launch_args, "executable_path": executable, "headless": True,
            "args": ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]}


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where screenshots are kept after the run."""
    path = Path(os.environ.get("EBB_TEST_ARTIFACTS") or REPO / ".artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Browser tests run last: pytest-playwright's sync API keeps its own event loop running in the main thread
    for the session, and pytest-asyncio cannot run a test while it does ("Runner.run() cannot be called from a
    running event loop")."""
    here = Path(__file__).parent
    browser = [item for item in items if here in Path(str(item.fspath)).parents]
    if browser:
        items[:] = [item for item in items if item not in browser] + browser
