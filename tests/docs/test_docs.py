"""The documentation keeps its promises: what a reader follows works, and what a reader reads is current.

What is checked, over README.md and every ``docs/**/*.md`` (the pages):

- **Links.** Every relative link (``[text](path)``, ``![alt](path)``, ``[ref]: path``) names a file or directory
  of the repository; an ``#anchor``, on its own or after a Markdown file, names a heading of that file, slugged as
  GitHub does (lowercase; every character that is not a letter, a number, ``_``, ``-`` or a space dropped; spaces
  to ``-``; a repeated heading gets ``-1``, ``-2``, ...). Links inside code are not links.
- **No history.** The pages (outside any ``CHANGELOG.md`` and outside the generated results of
  docs/benchmarks.md: from its ``## Results`` heading to the next ``## `` heading, which ``make bench`` writes)
  and the docstrings and comments of the code (``libs``, ``services``, ``apps``, ``bench``) hold no commit hash of
  this repository and no calendar date. A *commit hash* is a word of 7 to 40 hex digits that is the short hash
  git prints for a commit of any branch (``git log --all --format=%h``), or the first 7 to 12 characters, or all,
  of a full one; without a git checkout this check is skipped. A *calendar date* is ``YYYY-MM-DD`` as history
  writes it. The rule that tells it from an input, kept simple: a date is allowed where it is an input or an
  output, that is inside code (a fenced block, or an inline code span: `` `...` ``, ````` ``...`` `````) or
  followed at once by ``T`` (an RFC 3339 time such as ``--now 2026-11-23T18:30:00Z``); anywhere else it is
  history. History goes to CHANGELOG.md and git.
- **Commands run.** Every command of a fenced ``console``, ``sh``, ``bash`` or ``shell`` block whose program is
  ``ebb`` (or ``.venv/bin/ebb``) runs and exits as the page shows. In a ``console`` block the commands are the
  lines that start with ``$ ``; in the others every line that is neither blank nor a comment (a trailing ``\\``
  joins the next line). The exit status expected is 0, or ``N`` where the line ends with the comment
  ``# exit N``. A block that cannot run here (it needs a cluster, a server, or files the reader supplies) is
  marked by the HTML comment ``<!-- norun -->`` on the line before its fence (blank lines between allowed), or
  written as a ``text`` block. Commands of other programs (``kubectl``, ``curl``, ``make``) are not run. Each
  command runs with bash, the ``ebb`` of this interpreter's virtualenv first on the ``PATH``, in a scratch
  directory where ``examples/`` is the repository's (so it reads the example data and writes nothing into the
  checkout); keep them quick (seconds: a short ``--duration``).
- **References complete.** docs/cli.md names every option of every ``ebb`` command in that command's section;
  docs/settings.md every environment variable of every service's settings; docs/metrics.md every Prometheus
  metric the code registers and every Kubernetes Event reason of ``ebb.core.events``; docs/rest.md every route
  of the decisions-api (``GET /v1/decisions``). A new option, setting, metric or route fails here until the
  reference says what it is.
- README.md stays short: at most 800 words.

Each failure names the file and the line.
"""

from __future__ import annotations

import ast
import importlib
import io
import os
import re
import shlex
import subprocess
import sys
import tokenize
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
CODE_ROOTS = ("libs", "services", "apps", "bench")
RUNNABLE_FENCES = frozenset({"console", "sh", "bash", "shell"})
NORUN = "<!-- norun -->"
EBB_PROGRAMS = frozenset({"ebb", ".venv/bin/ebb"})
README_MAX_WORDS = 800
COMMAND_TIMEOUT_SECONDS = 300

FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([^\s`]*)")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_CODE = re.compile(r"(`+)(?:[^`\n]|\n(?!\s*\n))+?\1(?!`)")
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.MULTILINE)
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")
DATE = re.compile(r"(?<![\d-])(?:19|20)\d\d-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])(?![\dT])")
HEX_WORD = re.compile(r"(?<![0-9A-Za-z_])[0-9a-f]{7,40}(?![0-9A-Za-z_])")
EXIT_COMMENT = re.compile(r"#\s*exit\s+(\d+)\s*$")


# -- the pages ---------------------------------------------------------------------------------------------------


def pages() -> list[Path]:
    """README.md and every Markdown page under docs/."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


@dataclass(frozen=True, slots=True)
class Block:
    """A fenced code block: its info word, the line of its opening fence (1-based), its lines, and whether the
    line before it says ``<!-- norun -->``."""

    info: str
    line: int
    lines: tuple[str, ...]
    norun: bool


def blocks(text: str) -> list[Block]:
    out: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        fence, info = opened.group(1), opened.group(2).lower()
        before = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not re.match(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$", lines[j]):
            body.append(lines[j])
            j += 1
        out.append(Block(info, i + 1, tuple(body), before == NORUN))
        i = j + 1
    return out


def _blank(match: re.Match[str]) -> str:
    """The matched text with every character but the line breaks blanked (line numbers stay)."""
    return re.sub(r"[^\n]", " ", match.group(0))


def outside_fences(text: str) -> str:
    """The text with its fenced code blocks blanked out, line for line."""
    lines = text.splitlines()
    in_code: str | None = None
    kept: list[str] = []
    for line in lines:
        opened = FENCE.match(line)
        if in_code is None and opened:
            in_code = opened.group(1)
            kept.append("")
        elif in_code is not None:
            if re.match(rf"^\s*{re.escape(in_code[0])}{{{len(in_code)},}}\s*$", line):
                in_code = None
            kept.append("")
        else:
            kept.append(line)
    return "\n".join(kept)


def prose(text: str) -> str:
    """The text with its code (fenced blocks, inline code spans) blanked out, line for line."""
    return INLINE_CODE.sub(_blank, outside_fences(text))


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


# -- links -------------------------------------------------------------------------------------------------------


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text (github-slugger): the rendered text, lowercased, with every character
    that is no letter, mark, number, connector (``_``), ``-`` or space dropped and spaces made ``-``."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = text.replace("`", "").lower()
    kept = "".join(c for c in text
                   if c in " -" or unicodedata.category(c)[0] in "LMN" or unicodedata.category(c) == "Pc")
    return kept.replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    """Every anchor a Markdown file has: its headings' slugs (repeats numbered) and its HTML anchors."""
    text = path.read_text(encoding="utf-8")
    seen: dict[str, int] = {}
    found: set[str] = set(HTML_ANCHOR.findall(text))
    for line in outside_fences(text).splitlines():
        heading = HEADING.match(line)
        if not heading:
            continue
        base = slug(heading.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return frozenset(found)


def links(text: str) -> Iterator[tuple[int, str]]:
    """(line, target) of every link and reference definition outside code."""
    masked = prose(text)
    for pattern in (LINK, REFERENCE):
        for match in pattern.finditer(masked):
            yield line_of(masked, match.start(1)), match.group(1)


def broken_links(page: Path) -> list[str]:
    problems: list[str] = []
    for line, target in links(page.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # http:, https:, mailto: ...
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        where = f"{rel(page)}:{line}: {target}"
        if not dest.exists():
            problems.append(f"{where}: no such file")
        elif REPO not in (dest, *dest.parents):
            problems.append(f"{where}: outside the repository")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{where}: no heading #{anchor} in {rel(dest)}")
    return problems


@pytest.mark.parametrize("doc", pages(), ids=rel)  # not "page": pytest-playwright's fixture
def test_every_relative_link_resolves(doc: Path) -> None:
    problems = broken_links(doc)
    assert not problems, "\n".join(problems)


def test_the_slugs_are_githubs() -> None:
    assert slug("Back-testing: `ebb backtest` and `ebb run --trace`") == "back-testing-ebb-backtest-and-ebb-run---trace"
    assert slug("`consolidationPolicy: Balanced` (Karpenter v1.14)") == "consolidationpolicy-balanced-karpenter-v114"
    assert slug("Settings (`EBB_CLUSTER_WATCHER_*`)") == "settings-ebb_cluster_watcher_"
    assert slug("ebb next to Karpenter: karpenter.yaml") == "ebb-next-to-karpenter-karpenteryaml"


# -- no history ----------------------------------------------------------------------------------------------------


@cache
def commit_hashes() -> frozenset[str]:
    """The words that name a commit of this repository: each short hash, and each full hash's 7-12 character
    prefixes and itself. Empty without git or a checkout."""
    try:
        out = subprocess.run(["git", "-C", str(REPO), "log", "--all", "--format=%h %H"], capture_output=True,
                             text=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    words: set[str] = set()
    for line in out.split("\n"):
        if not line.strip():
            continue
        short, full = line.split()
        words.add(short)
        words.add(full)
        words.update(full[:n] for n in range(7, 13))
    return frozenset(words)


def needs_git() -> frozenset[str]:
    hashes = commit_hashes()
    if not hashes:
        pytest.skip("not a git checkout: no commit hashes to look for")
    return hashes


def history_in(text: str, first_line: int, hashes: frozenset[str], *, code_is_masked: str | None = None) -> list[str]:
    """The dates and commit hashes in ``text`` (its first line is ``first_line``): dates looked for in
    ``code_is_masked`` (the same text with its code blanked), hashes everywhere."""
    found: list[str] = []
    masked = code_is_masked if code_is_masked is not None else text
    for match in DATE.finditer(masked):
        found.append(f"{first_line + line_of(masked, match.start()) - 1}: date {match.group(0)}")
    for match in HEX_WORD.finditer(text):
        if match.group(0) in hashes:
            found.append(f"{first_line + line_of(text, match.start()) - 1}: commit hash {match.group(0)}")
    return found


def generated_lines(page: Path, text: str) -> set[int]:
    """The lines ``make bench`` writes (docs/benchmarks.md's ``## Results`` section), 1-based."""
    if rel(page) != "docs/benchmarks.md":
        return set()
    skipped: set[int] = set()
    inside = False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("## "):
            inside = line.strip() == "## Results"
        if inside:
            skipped.add(number)
    return skipped


def page_history(page: Path, hashes: frozenset[str]) -> list[str]:
    text = page.read_text(encoding="utf-8")
    skipped = generated_lines(page, text)
    found = history_in(text, 1, hashes, code_is_masked=prose(text))
    return [f"{rel(page)}:{hit}" for hit in found if int(hit.split(":")[0]) not in skipped]


@pytest.mark.parametrize("doc", [p for p in pages() if p.name != "CHANGELOG.md"], ids=rel)
def test_no_dates_or_commit_hashes_in_the_pages(doc: Path) -> None:
    hits = page_history(doc, needs_git())
    assert not hits, "history belongs in CHANGELOG.md and git:\n" + "\n".join(hits)


def code_files() -> list[Path]:
    found: list[Path] = []
    for root in CODE_ROOTS:
        found.extend(p for p in sorted((REPO / root).rglob("*.py")) if "__pycache__" not in p.parts)
    return found


def docstrings_and_comments(source: str) -> Iterator[tuple[int, str]]:
    """(first line, text) of every comment and every string that stands as a statement (docstrings, and the
    strings that document an attribute)."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            yield node.lineno, node.value.value


def code_history(path: Path, hashes: frozenset[str]) -> list[str]:
    hits: list[str] = []
    for line, text in docstrings_and_comments(path.read_text(encoding="utf-8")):
        masked = INLINE_CODE.sub(_blank, text)
        hits.extend(f"{rel(path)}:{hit}" for hit in history_in(text, line, hashes, code_is_masked=masked))
    return hits


@pytest.mark.parametrize("path", code_files(), ids=rel)
def test_no_dates_or_commit_hashes_in_docstrings_and_comments(path: Path) -> None:
    hits = code_history(path, needs_git())
    assert not hits, "history belongs in CHANGELOG.md and git:\n" + "\n".join(sorted(hits))


def test_the_history_rule() -> None:
    hashes = frozenset({"7029b99", "aaeca18f00"})
    text = "run at 2026-11-29 (code 7029b99); `--now 2026-11-23` and --now 2026-11-23T18:30:00Z; aaeca18f00."
    assert [h.split(": ", 1)[1] for h in history_in(text, 1, hashes, code_is_masked=prose(text))] == [
        "date 2026-11-29", "commit hash 7029b99", "commit hash aaeca18f00"]
    assert history_in("deadbeef 1234567 and 2026-13-01", 1, hashes) == []


# -- commands ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Command:
    page: str
    line: int
    text: str
    exit_code: int

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def commands_of(block: Block) -> Iterator[tuple[int, str]]:
    """(line, command) of a runnable block: ``$ `` lines of a console block, every command line otherwise."""
    pending: list[str] = []
    start = 0
    for offset, raw in enumerate(block.lines, start=1):
        line = raw.strip()
        if not pending:
            if block.info == "console":
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            elif not line or line.startswith("#"):
                continue
            start = block.line + offset
        if line.endswith("\\"):
            pending.append(line[:-1])
            continue
        pending.append(line)
        yield start, " ".join(pending)
        pending = []


def program(command: str) -> str:
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        return ""
    return words[0] if words else ""


def runnable_commands() -> list[Command]:
    found: list[Command] = []
    for page in pages():
        for block in blocks(page.read_text(encoding="utf-8")):
            if block.info not in RUNNABLE_FENCES or block.norun:
                continue
            for line, text in commands_of(block):
                if program(text) in EBB_PROGRAMS:
                    expected = EXIT_COMMENT.search(text)
                    found.append(Command(rel(page), line, text, int(expected.group(1)) if expected else 0))
    return found


@pytest.mark.parametrize("command", runnable_commands(), ids=lambda c: c.id)
def test_every_runnable_command_exits_as_shown(command: Command, tmp_path: Path) -> None:
    bin_dir = Path(sys.executable).parent
    (tmp_path / "examples").symlink_to(REPO / "examples")
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "ebb").symlink_to(bin_dir / "ebb")
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "COLUMNS": "100",
           "NO_COLOR": "1"}
    done = subprocess.run(["bash", "-o", "pipefail", "-c", command.text], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=COMMAND_TIMEOUT_SECONDS, check=False)
    assert done.returncode == command.exit_code, (
        f"{command.id}: `{command.text}` exited {done.returncode}, the page shows {command.exit_code}\n"
        f"stderr (end):\n{done.stderr[-2000:]}")


def test_the_command_convention() -> None:
    text = ("```console\n$ ebb plan -f examples/cluster.yaml \\\n  -o json\n{\n$ ebb plan  # exit 2\n```\n\n"
            "<!-- norun -->\n\n```sh\nebb plan --live\n```\n```sh\n# a comment\nkubectl get nodes\n```\n")
    found = [(b.info, b.norun, list(commands_of(b))) for b in blocks(text)]
    assert found == [("console", False, [(2, "ebb plan -f examples/cluster.yaml  -o json"), (5, "ebb plan  # exit 2")]),
                     ("sh", True, [(11, "ebb plan --live")]),
                     ("sh", False, [(15, "kubectl get nodes")])]
    assert EXIT_COMMENT.search("ebb plan  # exit 2") is not None


# -- references ----------------------------------------------------------------------------------------------------


def section(page: str, title: str) -> str:
    """The text under the heading whose text (backticks dropped) is ``title``, to the next heading of its level
    or above; empty when there is none."""
    lines = (REPO / page).read_text(encoding="utf-8").splitlines()
    masked = outside_fences("\n".join(lines)).split("\n")
    for i, line in enumerate(masked):
        heading = HEADING.match(line)
        if heading and heading.group(2).replace("`", "") == title:
            level = len(heading.group(1))
            end = next((j for j in range(i + 1, len(lines))
                        if (h := HEADING.match(masked[j])) and len(h.group(1)) <= level), len(lines))
            return "\n".join(lines[i + 1:end])
    return ""


def cli_commands() -> list[tuple[str, list[str]]]:
    """(``ebb plan``, its visible options and arguments) for the ``ebb`` group and every command under it."""
    import typer.main

    from ebb_cli.main import app

    out: list[tuple[str, list[str]]] = []

    def walk(command: Any, path: str) -> None:
        names: list[str] = []
        for param in command.params:
            if getattr(param, "hidden", False):
                continue
            if param.param_type_name == "option":
                longs = [o for o in param.opts if o.startswith("--")]
                if longs and longs[0] != "--help":
                    names.append(longs[0])
            else:
                names.append((param.name or "").upper())
        out.append((path, names))
        subcommands: dict[str, Any] = getattr(command, "commands", {})
        for name, sub in sorted(subcommands.items()):
            if not sub.hidden:
                walk(sub, f"{path} {name}")

    walk(typer.main.get_command(app), "ebb")
    return out


def test_the_cli_reference_names_every_command_and_option() -> None:
    missing: list[str] = []
    for path, names in cli_commands():
        text = section("docs/cli.md", path)
        if not text:
            missing.append(f"docs/cli.md: no section `{path}`")
            continue
        missing.extend(f"docs/cli.md, `{path}`: {name}" for name in names if f"`{name}" not in text)
    assert not missing, "\n".join(missing)


def service_settings() -> list[tuple[str, list[str]]]:
    """(module, the environment variables of its Settings) for each service that has settings."""
    found: list[tuple[str, list[str]]] = []
    for path in sorted((REPO / "services").glob("*/src/*/settings.py")):
        module = f"{path.parent.name}.settings"
        settings = importlib.import_module(module).Settings
        prefix = str(settings.model_config.get("env_prefix") or "")
        found.append((module, [f"{prefix}{name}".upper() for name in settings.model_fields]))
    return found


def test_the_settings_reference_names_every_environment_variable() -> None:
    text = (REPO / "docs" / "settings.md").read_text(encoding="utf-8")
    everything = service_settings()
    assert everything, "no service settings found"
    missing = [f"{module}: {name}" for module, names in everything for name in names if f"`{name}`" not in text]
    assert not missing, "docs/settings.md lacks:\n" + "\n".join(missing)


METRIC = re.compile(r"\b(Counter|Gauge|Histogram|Summary)\(\s*\"(ebb_[a-z0-9_]+)\"")


def registered_metrics() -> list[str]:
    """The names the code's collectors expose (a counter's with ``_total``, as prometheus_client writes it)."""
    names: set[str] = set()
    for path in code_files():
        for kind, name in METRIC.findall(path.read_text(encoding="utf-8")):
            names.add(f"{name}_total" if kind == "Counter" and not name.endswith("_total") else name)
    return sorted(names)


def event_reasons() -> list[str]:
    from ebb.core import events

    return sorted({value for name, value in vars(events).items()
                   if name.isupper() and isinstance(value, str) and re.fullmatch(r"[A-Z][A-Za-z]+", value)
                   and value not in {events.NORMAL, events.WARNING}})


def test_the_metrics_reference_names_every_metric_and_event_reason() -> None:
    text = (REPO / "docs" / "metrics.md").read_text(encoding="utf-8")
    metrics, reasons = registered_metrics(), event_reasons()
    assert len(metrics) > 10 and len(reasons) > 10, "the scan found too little to be right"
    missing = [f"metric {m}" for m in metrics if f"`{m}`" not in text]
    missing += [f"event reason {r}" for r in reasons if f"`{r}`" not in text]
    assert not missing, "docs/metrics.md lacks:\n" + "\n".join(missing)


def api_routes() -> list[str]:
    """``METHOD /path`` of every route in the decisions-api's OpenAPI document."""
    from pydantic import SecretStr

    from ebb.adapters.bus import InMemoryBus
    from ebb_decisions_api.app import create_app
    from ebb_decisions_api.settings import Settings

    app = create_app(Settings(token=SecretStr("docs"), database_url="sqlite+aiosqlite:///:memory:"), bus=InMemoryBus())
    return sorted(f"{method.upper()} {path}" for path, operations in app.openapi()["paths"].items()
                  for method in operations)


def test_the_rest_reference_names_every_route() -> None:
    text = (REPO / "docs" / "rest.md").read_text(encoding="utf-8")
    routes = api_routes()
    assert routes
    missing = [route for route in routes if f"`{route}`" not in text]
    assert not missing, "docs/rest.md lacks:\n" + "\n".join(missing)


def test_the_readme_is_short() -> None:
    words = len((REPO / "README.md").read_text(encoding="utf-8").split())
    assert words <= README_MAX_WORDS, f"README.md has {words} words; at most {README_MAX_WORDS}"
