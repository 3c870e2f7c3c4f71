"""The pure half of `python -m bench work` (bench/work.py): reading cachegrind's count, the source folders a commit's
worktree is run from, and the comparison it prints. Counting itself runs valgrind for minutes: a benchmark, never a
test."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import work  # noqa: E402

CACHEGRIND_TAIL = """==11496==
==11496== I   refs:      94,729,118,502
"""


def test_the_count_is_read_from_cachegrinds_summary() -> None:
    assert [int(n.replace(",", "")) for n in work._REFS.findall(CACHEGRIND_TAIL)] == [94_729_118_502]
    assert work._REFS.findall("==1== I1  misses: 3\n") == []


def test_a_worktree_runs_from_its_own_sources_first() -> None:
    folders = work._sources(REPO_ROOT).split(":")
    assert folders[:2] == [str(REPO_ROOT / "libs/ebb/src"), str(REPO_ROOT / "apps/cli/src")]
    assert str(REPO_ROOT / "services/embedded/src") in folders
    assert str(REPO_ROOT / "services/consolidation-planner/src") in folders
    assert all(Path(f).is_dir() for f in folders)


def test_two_commits_are_compared_and_a_different_result_is_said() -> None:
    runs = [{"code": "5cc4aec", "instructions": 88_000_000_000},
            {"code": "ae9333f", "instructions": 94_729_118_502}]
    result: dict[str, Any] = {"duration": "1h", "wall_seconds": 540.2, "same_json": True, "runs": runs}
    text = "\n".join(work.render(result))
    assert "| 5cc4aec | 88,000,000,000 |" in text and "| ae9333f | 94,729,118,502 |" in text
    assert "5cc4aec executes -7.1% of ae9333f's instructions; the two runs' JSON is the same." in text
    assert "DIFFERENT" in "\n".join(work.render({**result, "same_json": False}))
    alone = "\n".join(work.render({**result, "runs": runs[:1]}))
    assert "executes" not in alone and "| 5cc4aec |" in alone
