"""Reading ``ebb plan`` / ``ebb run`` input from files and stdin into a snapshot.

The I/O half of snapshot loading: it opens the files (``-`` is stdin) and turns what cannot be read
into an ``InputError`` naming the file; splitting and parsing the text is ebb.core.yaml_documents,
turning documents into a snapshot is ebb.core.snapshot, and the instance-type catalog used when the
input has none is ebb.adapters.catalog's bundled one.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ebb.adapters.catalog import bundled_catalog
from ebb.core.model import Snapshot
from ebb.core.snapshot import parse_sources
from ebb.core.yaml_documents import InputError, iter_documents


def read_documents(path: str) -> Iterator[Any]:
    """The documents of one YAML file, or of stdin for ``-``, read lazily (see ebb.core.yaml_documents)."""
    try:
        if path == "-":
            yield from iter_documents(sys.stdin, "stdin")
            return
        with Path(path).open(encoding="utf-8") as stream:
            yield from iter_documents(stream, path)
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text") from exc


def load_snapshot(paths: list[str]) -> Snapshot:
    """The snapshot of every document in these files; raises InputError or SnapshotError (naming the file, then
    the document and field) for bad input."""
    return parse_sources(((_source_name(path), read_documents(path)) for path in paths),
                         bundled_catalog=bundled_catalog)


def _source_name(path: str) -> str:
    """How a file is named in an error message: its path as given, or stdin for ``-``."""
    return "stdin" if path == "-" else path
