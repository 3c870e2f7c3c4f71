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
from ebb.core.snapshot import parse_documents
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
    """The snapshot of every document in these files; raises InputError or SnapshotError for bad input."""
    def documents() -> Iterator[Any]:
        for path in paths:
            yield from read_documents(path)

    return parse_documents(documents(), bundled_catalog=bundled_catalog)
