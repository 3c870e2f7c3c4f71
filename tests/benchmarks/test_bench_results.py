"""`make bench --write` writes only docs/benchmarks.md's results block (bench/__main__.py, `write_results`): the
method above it and anything after it stay as written, each section of the run replaces the section of the same
title with the run's machine line under its heading, and the sections the run did not make are kept."""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.__main__ import RESULTS_END, RESULTS_START, write_results  # noqa: E402

PAGE = f"""# Benchmarks

The method.

## Results

{RESULTS_START}

Each section names its machine.

### Engine: 2,000 nodes

Machine: old box; run 2000-01-01 00:00 UTC.

| figure | value |
|---|---|
| pass | 9.00 s |

### Chaos run (10 minutes, 40 nodes, seed 1)

Machine: old box; run 2000-01-02 00:00 UTC.

0 violations.

{RESULTS_END}

## After the results

Kept.
"""

RUN = """Machine: new box, 2 cores; run 2030-05-06 07:08 UTC.

### Engine: 2,000 nodes

| figure | value |
|---|---|
| pass | 0.30 s |

### Memory: a 10,000-node snapshot

| peak RSS MiB |
|---|
| 315 |
"""


def test_a_run_replaces_its_sections_and_keeps_the_others() -> None:
    page = write_results(PAGE, RUN)
    head, _, rest = page.partition(RESULTS_START)
    block, _, tail = rest.partition(RESULTS_END)
    assert head == PAGE.partition(RESULTS_START)[0]
    assert tail == PAGE.partition(RESULTS_END)[2]
    assert "| pass | 0.30 s |" in block and "9.00 s" not in block
    engine = block.index("### Engine: 2,000 nodes")
    assert block.index("Machine: new box, 2 cores; run 2030-05-06 07:08 UTC.") > engine
    assert "Machine: old box; run 2000-01-02 00:00 UTC." in block and "0 violations." in block
    assert block.index("### Memory: a 10,000-node snapshot") > block.index("### Chaos run")
    assert block.lstrip().startswith("Each section names its machine.")


def test_writing_the_same_run_twice_changes_nothing_more() -> None:
    once = write_results(PAGE, RUN)
    assert write_results(once, RUN) == once


def test_a_page_without_the_block_gets_a_results_section_at_its_end() -> None:
    page = write_results("# Benchmarks\n\nThe method.\n", RUN)
    assert page.startswith("# Benchmarks\n\nThe method.\n\n## Results\n\n" + RESULTS_START)
    assert page.endswith(RESULTS_END + "\n")
    assert write_results("", RUN).startswith("## Results\n\n" + RESULTS_START)


def test_a_page_with_no_end_marker_has_its_block_run_to_the_end() -> None:
    old = PAGE.partition(RESULTS_END)[0]
    page = write_results(old, RUN)
    assert page.count(RESULTS_START) == 1 and page.count(RESULTS_END) == 1
    assert "| pass | 0.30 s |" in page and page.endswith(RESULTS_END + "\n")


def test_the_page_in_the_repository_has_one_block() -> None:
    page = (REPO_ROOT / "docs/benchmarks.md").read_text(encoding="utf-8")
    assert page.count(RESULTS_START) == 1 and page.count(RESULTS_END) == 1
    assert page.index(RESULTS_START) < page.index(RESULTS_END)
