"""Reading `ebb plan` input files: YAML documents from files or stdin, plus the bundled catalog."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from ebb.core.model import Snapshot
from ebb.core.snapshot import SnapshotError, parse_documents

BUNDLED_CATALOG = "aws-us-east-1.yaml"


class InputError(ValueError):
    """A file that cannot be read or is not YAML."""


def bundled_catalog() -> list[Any]:
    text = resources.files("ebb.data").joinpath(BUNDLED_CATALOG).read_text(encoding="utf-8")
    return [d for d in yaml.safe_load_all(text) if d]


def _load(path: str) -> list[Any]:
    import sys

    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    try:
        return list(yaml.load_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML: {exc}") from exc


def load_snapshot(paths: list[str]) -> Snapshot:
    documents: list[Any] = []
    for path in paths:
        documents.extend(_load(path))
    return parse_documents(documents, bundled_catalog=None if _has_catalog(documents) else bundled_catalog())


def _has_catalog(documents: list[Any]) -> bool:
    from ebb.core.snapshot import flatten

    try:
        return any(d.get("kind") == "InstanceTypeCatalog" for d in flatten(documents))
    except SnapshotError:
        return False
