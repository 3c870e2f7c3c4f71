"""Reading snapshot files: the streamed split must give exactly what parsing the whole file gives."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ebb.adapters.snapshot_files import load_snapshot
from ebb.core.snapshot import SnapshotError, flatten, parse_documents
from ebb.core.yaml_documents import InputError, iter_documents

SCENARIOS = Path(__file__).resolve().parents[3] / "shared" / "scenarios"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cluster.yaml"

LIST_DOC = """\
apiVersion: v1
items:
- apiVersion: v1
  kind: Node
  metadata:
    name: a
    labels:
      x: "1"
  status:
    allocatable: {cpu: "2", memory: 8Gi, pods: "29"}
- apiVersion: v1
  kind: Pod
  metadata:
    name: p
    namespace: default
    annotations:
      note: |
        first line

        after a blank line
  spec:
    nodeName: a
    containers:
    - name: c
      resources: {requests: {cpu: 250m}}
kind: List
metadata:
  resourceVersion: ""
"""


@pytest.mark.parametrize(
    "text",
    [
        LIST_DOC,
        "---\n" + LIST_DOC + "---\napiVersion: v1\nkind: Node\nmetadata: {name: b}\n",
        "apiVersion: v1\nkind: Node\nmetadata: {name: b}\n---\n# only a comment\n---\napiVersion: v1\n"
        "kind: Node\nmetadata: {name: c}\n",
        # items indented under their key: not kubectl's shape, parsed whole instead
        "apiVersion: v1\nkind: List\nitems:\n  - apiVersion: v1\n    kind: Node\n    metadata: {name: d}\n",
        # a comment at the line's start between items, and inside one
        LIST_DOC.replace("- apiVersion: v1\n  kind: Pod", "# the pod\n- apiVersion: v1\n# its kind\n  kind: Pod"),
        # an anchor in one item and its alias in a later one (what yaml.dump writes for shared objects): the items
        # are read whole, each once
        LIST_DOC.replace("    labels:\n      x: \"1\"", "    labels: &shared\n      x: \"1\"").replace(
            "    namespace: default\n", "    namespace: default\n    labels: *shared\n"),
        # a null item, and one that is a string, after the first: each item once, the wrapper not at all
        LIST_DOC.replace("kind: List\n", "- null\nkind: List\n"),
        LIST_DOC.replace("kind: List\n", "- just a string\nkind: List\n"),
        # a UTF-8 byte-order mark before the first document
        "\ufeffapiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\n---\n" + LIST_DOC,
    ],
)
def test_streamed_documents_equal_whole_parse(text: str) -> None:
    try:
        streamed = list(flatten(iter_documents(io.StringIO(text), "t.yaml")))
    except SnapshotError as exc:  # the whole read must refuse it too (an item that is not a mapping)
        with pytest.raises(SnapshotError, match="is not a mapping"):
            list(flatten(d for d in yaml.safe_load_all(text) if d))
        assert "is not a mapping" in str(exc)
        return
    whole = list(flatten(d for d in yaml.safe_load_all(text) if d))
    assert streamed == whole


@pytest.mark.parametrize("text", [
    "- apiVersion: v1\n  kind: Node\n  metadata: {name: a}\n- apiVersion: v1\n  kind: Node\n  metadata: {name: b}\n",
    "- null\n- null\n",
    "[]\n",
    "---\n- apiVersion: v1\n  kind: Node\n  metadata: {name: a}\n",
])
def test_a_document_that_is_a_sequence_stays_one_document(text: str) -> None:
    """yaml-rs gives a one-document stream as the document itself: a top-level sequence is one document
    (as PyYAML reads it), which the parser then refuses as not a mapping, never a stream of documents."""
    assert list(iter_documents(io.StringIO(text), "t.yaml")) == list(yaml.safe_load_all(text))
    with pytest.raises(SnapshotError, match="not a mapping"):
        parse_documents(iter_documents(io.StringIO(text), "t.yaml"))


def test_block_scalar_with_blank_line_survives_the_split() -> None:
    docs = list(iter_documents(io.StringIO(LIST_DOC), "t.yaml"))
    pod = next(d for d in docs if d["kind"] == "Pod")
    assert pod["metadata"]["annotations"]["note"] == "first line\n\nafter a blank line\n"


@pytest.mark.parametrize("name", sorted(p.stem for p in SCENARIOS.glob("*.yaml") if ".expect" not in p.name))
def test_scenarios_load_the_same_streamed(name: str) -> None:
    path = SCENARIOS / f"{name}.yaml"
    whole = list(flatten(d for d in yaml.safe_load_all(path.read_text()) if d))
    with path.open() as stream:
        assert list(flatten(iter_documents(stream, str(path)))) == whole


def test_example_snapshot_loads() -> None:
    snapshot = load_snapshot([str(EXAMPLE)])
    assert len(snapshot.nodes) == 300
    assert len(snapshot.pods) == 3000
    assert snapshot.catalog_source == "bundled"


def test_invalid_yaml_names_the_file_and_where(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata: {name: x\n")
    # an item that is not YAML on its own sends the reader to the whole document, which names where it fails
    with pytest.raises(InputError, match=r"bad\.yaml \(the document from line 2; line numbers below count from "
                                         r"there\): not valid YAML"):
        load_snapshot([str(bad)])


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        load_snapshot([str(tmp_path / "nope.yaml")])


_BLANKS = st.sampled_from(["", " ", "  ", "   ", "      "])  # one space: a line `_split_items` reads another way


@st.composite
def _list_documents(draw: st.DrawFn) -> str:
    """A kubectl `kind: List` dump whose items' block scalars and gaps hold blank lines of every kind."""
    out = ["apiVersion: v1\n", "items:\n"]
    for i in range(draw(st.integers(1, 4))):
        out += ["- apiVersion: v1\n", "  kind: ConfigMap\n", "  metadata:\n", f"    name: c{i}\n",
                "    annotations:\n", "      note: |\n", "        first\n"]
        for line in draw(st.lists(st.one_of(_BLANKS.map(lambda b: b + "\n"), st.just("        more\n")),
                                  max_size=4)):
            out.append(line)
        out.append("        last\n")
        out += [b + "\n" for b in draw(st.lists(_BLANKS, max_size=2))]  # between items, or before the wrapper
    out += ["kind: List\n", "metadata:\n", '  resourceVersion: ""\n']
    return "".join(out)


@settings(max_examples=150, deadline=None)
@given(_list_documents())
def test_list_items_split_as_text_read_as_the_whole_document(text: str) -> None:
    """Items cut out of a List as text (`_split_items`) read as the whole document does, blank lines in block scalars
    and between items included."""
    streamed = list(flatten(iter_documents(io.StringIO(text), "t.yaml")))
    whole = list(flatten(d for d in yaml.safe_load_all(text) if d))
    assert streamed == whole
