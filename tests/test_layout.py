"""The shape of the test suite, checked (import-linter sees only the installed packages, so the tests' imports
are read here with ``ast``):

- tests/unit/ is the pure core's and the pure contracts': a unit test imports nothing from ``ebb.adapters``, a
  service, ``ebb_embedded``, ``ebb_cli`` or ``bench``, no library the pure core may not use (the
  ``pure-core-and-contracts`` contract's list in pyproject.toml), loads no module by name (``importlib``), and
  of the tests only the kit (tests/kit/), whose modules it imports are held to the same rules, transitively.
- No test imports another test module or a conftest: what tests share is in tests/kit/ or is a fixture.

Every import counts, a function's too, and relative ones are resolved."""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
KIT = "tests.kit"


def _io_libraries() -> frozenset[str]:
    """The libraries the pure core may not import, as the import-linter contract lists them."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    [pure] = [c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == "pure-core-and-contracts"]
    return frozenset(name.split(".")[0] for name in pure["forbidden_modules"])


IO_LIBRARIES = _io_libraries()


def module_of(path: Path) -> str:
    """The dotted name of a file under the repository (``tests/kit/__init__.py`` → ``tests.kit``)."""
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(source: str, module: str, *, is_package: bool = False) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of every import in ``source``, the module ``module``: ``import a.b`` gives ``a.b``,
    ``from a import b`` gives ``a`` and ``a.b`` (b may be a submodule), relative imports resolved."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            if base == "__future__":
                continue
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"


def impure(name: str) -> str | None:
    """Why a unit test may not import ``name``, or None when it may."""
    top = name.split(".", maxsplit=1)[0]
    if name == "ebb.adapters" or name.startswith("ebb.adapters."):
        return "an adapter"
    if top.startswith("ebb_"):
        return "a service, the embedded mode or the CLI"
    if top == "bench":
        return "the benchmarks"
    if top in IO_LIBRARIES:
        return "a library the pure core may not use"
    if top == "importlib":
        return "a module loaded by name"
    if top == "tests" and name != KIT and not name.startswith(f"{KIT}."):
        return "a test module outside the kit"
    return None


def borrowed(name: str) -> bool:
    """Whether ``name`` is, or is inside, a test module or a conftest of this suite."""
    parts = name.split(".")
    return parts[0] == "tests" and any(p.startswith("test_") or p == "conftest" for p in parts[1:])


def kit_file(name: str) -> Path | None:
    """The file of the kit module ``name`` (or of the kit module it is a name in), if there is one."""
    parts = name.split(".")
    while len(parts) > 2:
        for candidate in (REPO.joinpath(*parts).with_suffix(".py"), REPO.joinpath(*parts, "__init__.py")):
            if candidate.is_file():
                return candidate
        parts.pop()
    return None


def impure_imports(path: Path, seen: set[Path] | None = None) -> list[str]:
    """What ``path`` imports that a unit test may not, following the kit modules it imports."""
    seen = set() if seen is None else seen
    seen.add(path)
    found: list[str] = []
    reported: set[int] = set()  # one problem a line: ``from a import b`` gives a and a.b
    where = path.relative_to(REPO)
    for line, name in imports(path.read_text(encoding="utf-8"), module_of(path), is_package=path.name == "__init__.py"):
        if (why := impure(name)) is not None:
            if line not in reported:
                found.append(f"{where}:{line} imports {name} ({why})")
                reported.add(line)
        elif (kit := kit_file(name)) is not None and kit not in seen:
            found += [f"{where}:{line} → {problem}" for problem in impure_imports(kit, seen)]
    return found


def test_unit_tests_import_only_the_pure_core_and_the_pure_kit() -> None:
    unit = sorted((TESTS / "unit").rglob("*.py"))
    assert len(unit) > 40  # the walk found the unit tests
    problems = [problem for path in unit for problem in impure_imports(path)]
    assert problems == [], "tests/unit/ is the pure core's: move these tests (tests/adapters, tests/service, " \
                           "tests/cli, ...) or the helper out of the pure kit\n" + "\n".join(problems)


def test_no_test_imports_another_test_module_or_a_conftest() -> None:
    problems = [f"{path.relative_to(REPO)}:{line} imports {name}"
                for path in sorted(TESTS.rglob("*.py"))
                for line, name in imports(path.read_text(encoding="utf-8"), module_of(path),
                                          is_package=path.name == "__init__.py")
                if borrowed(name)]
    assert problems == [], "share it through tests/kit/ or a fixture instead\n" + "\n".join(problems)


@pytest.mark.parametrize(("source", "module", "expected"), [
    ("def f():\n    from ebb.adapters.bus import InMemoryBus\n", "tests.unit.test_x",
     ["ebb.adapters.bus", "ebb.adapters.bus.InMemoryBus"]),
    ("from .test_planner import Running\n", "tests.service.test_x", ["tests.service.test_planner",
                                                                     "tests.service.test_planner.Running"]),
    ("from ..kit import builders\n", "tests.unit.test_x", ["tests.kit", "tests.kit.builders"]),
    ("from . import conftest\n", "tests.integration", ["tests.integration", "tests.integration.conftest"]),
    ("import ebb_cli.main as cli\n", "tests.unit.test_x", ["ebb_cli.main"]),
])
def test_the_check_reads_nested_and_relative_imports(source: str, module: str, expected: list[str]) -> None:
    assert [name for _, name in imports(source, module, is_package=module == "tests.integration")] == expected


@pytest.mark.parametrize(("name", "why"), [
    ("ebb.adapters.kube.drain", "an adapter"),
    ("ebb_consolidation_planner.planner", "a service, the embedded mode or the CLI"),
    ("bench.peer", "the benchmarks"),
    ("asyncio", "a library the pure core may not use"),
    ("importlib.util", "a module loaded by name"),
    ("tests.service.test_planner", "a test module outside the kit"),
    ("ebb.core.model", None),
    ("ebb.contracts.messages", None),
    ("tests.kit.builders.node", None),
])
def test_what_a_unit_test_may_import(name: str, why: str | None) -> None:
    assert impure(name) == why
