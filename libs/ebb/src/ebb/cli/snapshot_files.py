"""Reading `ebb plan` input files: YAML documents from files or stdin, plus the bundled catalog."""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
import yaml_rs

from ebb.core.model import Snapshot
from ebb.core.snapshot import SnapshotError, flatten, parse_documents

BUNDLED_CATALOG = "aws-us-east-1.yaml"


class InputError(ValueError):
    """A file that cannot be read or is not YAML."""


def bundled_catalog() -> list[Any]:
    text = resources.files("ebb.data").joinpath(BUNDLED_CATALOG).read_text(encoding="utf-8")
    return [d for d in parse_yaml(text, BUNDLED_CATALOG) if d]


def parse_yaml(text: str, path: str) -> list[Any]:
    """All documents of a YAML stream. yaml-rs (Rust) reads a 2,000-node dump about 15x faster than
    PyYAML's C loader; PyYAML is the fallback for anything yaml-rs refuses, and the source of the
    error message when both refuse it."""
    try:
        loaded = yaml_rs.loads(text)
    except Exception:
        loaded = None
    else:
        if isinstance(loaded, list) and all(isinstance(d, dict) or d is None for d in loaded):
            return loaded
        if isinstance(loaded, dict):
            return [loaded]
    try:
        return list(yaml.load_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML: {exc}") from exc


def _load(path: str) -> list[Any]:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text") from exc
    return parse_yaml(text, path)


def load_snapshot(paths: list[str]) -> Snapshot:
    documents: list[Any] = []
    for path in paths:
        documents.extend(_load(path))
    return parse_documents(documents, bundled_catalog=None if _has_catalog(documents) else bundled_catalog())


def _has_catalog(documents: list[Any]) -> bool:
    try:
        return any(d.get("kind") == "InstanceTypeCatalog" for d in flatten(documents))
    except SnapshotError:
        return False
