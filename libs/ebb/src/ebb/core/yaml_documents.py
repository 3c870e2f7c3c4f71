"""The documents of a YAML stream (a `kubectl get -o yaml` dump): text in, parsed documents out.

This is the pure half of reading ``ebb plan`` input: it never opens a file. Its callers hand it text or
lines from wherever they got them (ebb.adapters.snapshot_files reads files and stdin, the decisions-api
a request body) and a name for that source, which every error message starts with.

A 10,000-node dump is 100+ MiB of YAML. Parsing it whole keeps every object's dict tree alive at once
(1.3 GiB measured), so the stream is split as text into documents and, inside a `kind: List`, into its
items; each piece is parsed (yaml-rs, PyYAML as the fallback) and turned into a model value before
the next is read. Where the text does not have kubectl's regular shape, the whole document is parsed
at once instead, so correctness never depends on the splitting.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

import yaml
import yaml_rs

#: a line that starts or ends a document of a YAML stream
_SEPARATOR = re.compile(r"^(---|\.\.\.)(\s|$)", re.MULTILINE)


class InputError(ValueError):
    """Input that is not a YAML stream ebb can read (not YAML, or a file that cannot be read); the
    message starts with the source's name. ``ebb plan`` exits 2 with it."""


def parse_yaml(text: str, source: str) -> list[Any]:
    """All documents of a YAML stream. yaml-rs (Rust) reads a 2,000-node dump about 15x faster than
    PyYAML's C loader; PyYAML is the fallback for anything yaml-rs refuses, and the source of the
    error message when both refuse it."""
    try:
        # parse_datetime=False: yaml-rs would turn even quoted timestamps into datetimes; the parser
        # reads RFC 3339 strings itself, and strings (annotations) stay exactly as written
        loaded = yaml_rs.loads(text, parse_datetime=False)
    except Exception:
        loaded = None
    else:
        # yaml-rs returns a stream of one document as that document, and a longer stream as the list of its
        # documents: without a separator line, a list is one document that is a sequence (as PyYAML reads it),
        # not several documents (a top-level `- kind: Node` list, or `- null`, was planned as documents)
        if isinstance(loaded, list) and not _SEPARATOR.search(text):
            return [loaded]
        if isinstance(loaded, list) and all(isinstance(d, dict) or d is None for d in loaded):
            return loaded
        if isinstance(loaded, dict):
            return [loaded]
    try:
        return list(yaml.load_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    except yaml.YAMLError as exc:
        raise InputError(f"{source}: not valid YAML: {exc}") from exc


#: how the lines that may start or end a document begin (the others are read no further)
_MARKS = ("---", "...")


def _documents_text(lines: Iterable[str]) -> Iterator[tuple[int, list[str]]]:
    """(first line number, lines) of each document of a YAML stream, split at `---` lines."""
    current: list[str] = []
    start = 1
    for number, line in enumerate(lines, start=1):
        if line.startswith(_MARKS) and (line[3:].strip() in ("", "|", ">") if line[0] == "-"
                                        else line.rstrip() == "..."):
            if any(x.strip() and not x.lstrip().startswith("#") for x in current):
                yield start, current
            current, start = [], number + 1
            continue
        current.append(line)
    if any(x.strip() and not x.lstrip().startswith("#") for x in current):
        yield start, current


#: the end of a kubectl `kind: List` document's items: a line that neither starts an item (``- ``), goes on with one
#: (two spaces), is a comment at the line's start (it stays with the item before it, where YAML ignores it) nor is
#: blank
_ITEMS_END = re.compile(r"\n(?!- |  |#|[^\S\n]*(?:\n|\Z))")
#: a blank line that is not empty and does not start with two spaces: an item's line that `_DEDENT` must read
_ODD_BLANK = re.compile(r"\n(?: ?[^\S\n ][^\S\n]*| )(?=\n|\Z)")
#: what an item's line loses to be read on its own: its first two characters, or all of a blank one
_DEDENT = re.compile(r"^(?:- |  |[^\S\n]+$)", re.MULTILINE)


def _split_items(lines: list[str]) -> tuple[list[str], str] | None:
    """A kubectl `kind: List` document as (each item's text, dedented; the wrapper's text without its items), or
    None when the document does not have that regular shape. The text is cut with string methods, in C: a dump's
    items are most of its lines."""
    try:
        at = lines.index("items:\n") if "items:\n" in lines else lines.index("items:")
    except ValueError:
        return None
    body = "".join(lines[at + 1:])
    if not body.startswith("- "):
        return None
    found = _ITEMS_END.search(body)
    end = len(body) if found is None else found.start() + 1
    block, wrapper = body[:end], "".join(lines[:at]) + body[end:]
    if _ODD_BLANK.search(block):  # rare: a line of one space or of tabs, which loses all of it
        return [_DEDENT.sub("", item) for item in re.split(r"(?m)^(?=- )", block) if item], wrapper
    # each item starts with "- " (the first at the block's start, the others after a line's end), its other lines
    # with two spaces or none (blank)
    items = block[2:].split("\n- ")
    return [*(item.replace("\n  ", "\n") + "\n" for item in items[:-1]), items[-1].replace("\n  ", "\n")], wrapper


def _without_first_items(docs: list[Any], done: int) -> Iterator[Any]:
    """``docs`` (a `kind: List` document parsed whole) without the first ``done`` items of its list: those the split
    yielded already."""
    for doc in docs:
        if done and isinstance(doc, dict) and isinstance(doc.get("items"), list):
            yield {**doc, "items": doc["items"][done:]}
        else:
            yield doc


def iter_documents(lines: Iterable[str], source: str) -> Iterator[Any]:
    """The documents of a YAML stream given as lines (a text file or ``io.StringIO`` will do), one at a
    time; a `kind: List` yields its items instead of itself. ``source`` names the stream in errors. A byte-order
    mark at the start of the stream is dropped, as YAML readers drop it."""
    first = True
    for start, text in _documents_text(lines):
        if first and text and text[0].startswith("\ufeff"):
            text[0] = text[0][1:]
        first = False
        where = f"{source} (the document from line {start}; line numbers below count from there)"
        split = _split_items(text)
        if split is None:
            yield from parse_yaml("".join(text), where)
            continue
        items, wrapper = split
        done = 0
        try:
            for item in items:
                parsed = parse_yaml(item, f"{source} (a List item in the document from line {start})")
                if len(parsed) != 1 or not isinstance(parsed[0], dict):  # not the shape we assumed
                    break
                yield parsed[0]
                done += 1
            else:
                wrapped = parse_yaml(wrapper, where)
                if all(isinstance(doc, dict) for doc in wrapped):
                    for doc in wrapped:
                        doc.pop("items", None)
                        if not doc.get("kind", "").endswith("List"):
                            yield doc  # a List's wrapper carries nothing ebb reads
                    continue
        except InputError:
            pass  # an item or the wrapper is not YAML on its own (an alias of another item's anchor, say)
        # the text does not split the way kubectl writes it: the document whole, less the items yielded already
        # (correctness never depends on the splitting)
        yield from _without_first_items(parse_yaml("".join(text), where), done)
