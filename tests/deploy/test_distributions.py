"""Each workspace distribution declares what its modules import, and the pure core needs only ``ebb-core``'s
base dependencies.

A module's third-party imports (at the top or in a function) are mapped to distributions with the development
virtualenv's metadata. A distribution "provides" what its requirements (its own and those of every extra it
declares, workspace members' followed through their pyproject.toml, third parties' through their metadata) install.
The clean install (test_cli_install.py) proves the same of the CLI by running it; this check covers every member
and every import, including the lazy ones no test of the install reaches.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]

#: the workspace's distributions, by name: (its pyproject.toml, its source packages)
MEMBERS = {
    tomllib.loads(p.read_text(encoding="utf-8"))["project"]["name"]: p
    for p in sorted([*ROOT.glob("libs/*/pyproject.toml"), *ROOT.glob("services/*/pyproject.toml"),
                     *ROOT.glob("apps/*/pyproject.toml")])
}


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@cache
def project(member: str) -> dict[str, object]:
    project: dict[str, object] = tomllib.loads(MEMBERS[member].read_text(encoding="utf-8"))["project"]
    return project


def third_party_imports(paths: Iterable[Path]) -> dict[str, set[str]]:
    """The top-level third-party modules the files import, each with the files that import it."""
    found: dict[str, set[str]] = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "__future__" and not top.startswith("ebb"):
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def sources(member: str) -> list[Path]:
    return sorted((MEMBERS[member].parent / "src").rglob("*.py"))


def provided(requirements: Iterable[str]) -> set[str]:
    """The normalized names of every distribution the requirements install (followed transitively)."""
    seen: set[tuple[str, frozenset[str]]] = set()
    names: set[str] = set()
    pending = [Requirement(r) for r in requirements]
    while pending:
        requirement = pending.pop()
        name, extras = normalized(requirement.name), frozenset(requirement.extras)
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        names.add(name)
        member = next((m for m in MEMBERS if normalized(m) == name), None)
        if member is not None:
            optional: dict[str, list[str]] = project(member).get("optional-dependencies", {})  # type: ignore[assignment]
            pending += [Requirement(r) for r in project(member).get("dependencies", [])]  # type: ignore[attr-defined]
            pending += [Requirement(r) for extra in extras for r in optional[extra]]
            continue
        for text in importlib.metadata.requires(requirement.name) or []:
            needed = Requirement(text)
            if needed.marker is None or any(needed.marker.evaluate({"extra": e}) for e in ("", *extras)):
                pending.append(needed)
    return names


@cache
def installed_modules() -> Mapping[str, list[str]]:
    return importlib.metadata.packages_distributions()


def distributions_of(module: str) -> set[str]:
    return {normalized(d) for d in installed_modules().get(module, [])}


def undeclared(imports: dict[str, set[str]], declared: set[str]) -> list[str]:
    return [f"{module} (imported by {', '.join(sorted(files))})" for module, files in sorted(imports.items())
            if not distributions_of(module) & declared]


@pytest.mark.parametrize("member", sorted(MEMBERS))
def test_every_import_is_declared_by_the_distribution_or_one_of_its_extras(member: str) -> None:
    extras = ",".join(project(member).get("optional-dependencies", {}))  # type: ignore[arg-type]
    declared = provided([f"{member}[{extras}]" if extras else member])
    imports = third_party_imports(sources(member))
    assert imports, f"{member}: no third-party import found (the scan is broken)"
    assert undeclared(imports, declared) == []


def test_the_pure_core_and_the_input_need_only_the_base_install() -> None:
    """What ``ebb plan`` imports of the library (the core, the YAML input, the bundled catalog) is in ebb-core's
    base dependencies, without an extra."""
    library = MEMBERS["ebb-core"].parent / "src" / "ebb"
    files = [*sorted((library / "core").rglob("*.py")), library / "adapters" / "snapshot_files.py",
             library / "adapters" / "catalog.py", library / "adapters" / "engine_options.py"]
    assert undeclared(third_party_imports(files), provided(["ebb-core"])) == []


def test_the_check_sees_an_undeclared_import() -> None:
    """The check can fail: ebb-core's base install does not provide what the Kafka bus imports."""
    kafka = [MEMBERS["ebb-core"].parent / "src" / "ebb" / "adapters" / "bus" / "kafka.py"]
    assert any(line.startswith("aiokafka") for line in undeclared(third_party_imports(kafka), provided(["ebb-core"])))


def test_no_member_is_named_ebb() -> None:
    """`ebb` on the package index is another project: no distribution of the workspace (or requirement) is named so."""
    assert "ebb" not in {normalized(m) for m in MEMBERS}
    for member in MEMBERS:
        requirements = [Requirement(r) for r in project(member).get("dependencies", [])]  # type: ignore[attr-defined]
        assert "ebb" not in {normalized(r.name) for r in requirements}, member


def test_every_member_supports_python_3_11_to_3_13() -> None:
    for member in MEMBERS:
        assert project(member)["requires-python"] == ">=3.11,<3.14", member
