"""Documents past a limit are refused at the door of every ingest path, on every backend
and under both mappings, with a clear error and nothing kept (issue 18)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tesseradb._core import flatten_documents
from tesseradb.documents import DocumentLimits, flatten_document
from tesseradb.errors import DocumentError, LimitExceededError


def nested(depth: int) -> dict[str, Any]:
    """A document nested ``depth`` deep (the document itself is level 1)."""
    value: Any = 1
    for level in range(depth - 1):  # each wrapper, object or array, is one level more
        value = [value] if level % 2 else {"a": value}
    return {"top": value}


def nested_levels(doc: Any) -> int:
    if isinstance(doc, dict):
        return 1 + max((nested_levels(v) for v in doc.values()), default=0)
    if isinstance(doc, list):
        return 1 + max((nested_levels(v) for v in doc), default=0)
    return 0


def cyclic() -> dict[str, Any]:
    doc: dict[str, Any] = {"x": 1}
    doc["self"] = doc
    return doc


def bad_documents(limits: DocumentLimits) -> list[tuple[str, Any, type[Exception], str]]:
    """(label, document, error, what the message says) past each limit of ``limits``."""
    long_string = "s" * (limits.string_bytes + 1)
    cases = [
        ("too deep", nested(limits.depth + 1), LimitExceededError, "nested"),
        ("holds itself", cyclic(), LimitExceededError, "nested"),
        ("long key", {"k" * (limits.key_chars + 1): 1}, LimitExceededError, "characters"),
        ("long path", {"k" * (limits.key_chars - 2): [1] * 10}, LimitExceededError, "[9]"),
        ("surrogate value", {"s": "a\ud800b"}, DocumentError, "surrogate"),
        ("surrogate key", {"a\udfffb": 1}, DocumentError, "surrogate"),
        ("too many leaves", {"a": list(range(limits.leaves + 1))}, LimitExceededError, "leaves"),
    ]
    if limits.string_bytes < 1 << 20:  # a 16 MiB string is made only where it is the limit
        cases.append(("long string", {"s": long_string}, LimitExceededError, "bytes"))
    if limits.key_and_string_bytes:
        pair = "p" * (limits.key_and_string_bytes - 1)
        cases.append(("key and string", {"kk": pair}, LimitExceededError, "together"))
    if not limits.nul:
        cases.append(("NUL", {"s": "a\x00b"}, DocumentError, "U+0000"))
    return cases


def documents_at_the_limits(limits: DocumentLimits) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = [
        nested(limits.depth),
        {"k" * limits.key_chars: "at the key limit"},
        {"a": list(range(limits.leaves - 1)), "b": 1},
    ]
    if limits.key_and_string_bytes:
        docs.append({"kk": "p" * (limits.key_and_string_bytes - 2)})
    else:  # a string of exactly the limit, or 80,000 bytes where the limit is far above
        size = min(limits.string_bytes, 80_000)
        docs.append({"s": "é" * (size // 2) + "x" * (size % 2)})
    return docs


class TestEveryIngestPath:
    """Conformance over every backend and mapping (the ``make_collection`` fixture)."""

    PATHS = ("insert", "insert_many", "load_jsonl", "argo insert", "update")

    def ingest(self, coll: Any, path: str, doc: Any) -> None:
        db = coll._test_db
        if path == "insert":
            coll.insert(doc)
        elif path == "insert_many":
            coll.insert_many([{"fine": 1}, doc])
        elif path == "load_jsonl":
            text = json.dumps({"fine": 1}) + "\n" + _json_line(doc)
            coll.load_jsonl(io.StringIO(text))
        elif path == "argo insert":
            db.argo(f"INSERT INTO {coll.name} OBJECT {_json_line(doc)}")
        else:  # an UPDATE that makes a stored object bad
            if not isinstance(doc, dict) or len(doc) != 1:
                pytest.skip("an UPDATE sets one path")
            ((key, value),) = doc.items()
            db.argo(f"UPDATE {coll.name} SET `{key}` = ? WHERE fine = 0", [value])

    @pytest.mark.parametrize("path", PATHS)
    def test_bad_documents_are_refused_and_nothing_is_kept(
        self, make_collection: Any, docdb: Any, path: str
    ) -> None:
        coll = make_collection()
        coll._test_db = docdb
        coll.insert({"fine": 0, "keep": "me"})
        before = coll.find()
        tried = 0
        for label, doc, error, says in bad_documents(coll.backend.limits):
            if path in ("load_jsonl", "argo insert") and label in ("holds itself",):
                continue  # no JSON text holds itself
            if path == "update" and label in ("holds itself", "too deep", "too many leaves"):
                continue  # an assignment's value is one JSON value of the statement
            if path in ("load_jsonl", "argo insert") and "surrogate" in label:
                doc = {"s": "x"}  # json.dumps escapes lone surrogates; tested below
                continue
            tried += 1
            with pytest.raises(error) as caught:
                self.ingest(coll, path, doc)
            message = str(caught.value)
            assert says in message, (label, message)
            assert f"collection {coll.name!r}" in message, message
            assert coll.find() == before, label
        assert tried >= 3

    def test_documents_at_the_limits_are_kept_whole(self, make_collection: Any) -> None:
        coll = make_collection()
        docs = documents_at_the_limits(coll.backend.limits)
        coll.insert_many(docs)
        back = coll.find()
        assert back == docs
        assert nested_levels(back[0]) == coll.backend.limits.depth

    def test_escaped_lone_surrogates_in_json_text(self, make_collection: Any, docdb: Any) -> None:
        coll = make_collection()
        coll.insert({"fine": 1})
        with pytest.raises(DocumentError, match=r"line 2.*surrogate"):
            coll.load_jsonl(io.StringIO('{"ok": 1}\n{"s": "\\ud800"}\n'))
        with pytest.raises(DocumentError, match="surrogate"):
            docdb.argo(f'INSERT INTO {coll.name} OBJECT {{"s": "\\udc00x"}}')
        assert coll.find() == [{"fine": 1}]


def _json_line(doc: Any) -> str:
    return json.dumps(doc)


# --- the kernel and the reference refuse the same documents ---------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=6),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=12,
)
small_limits = st.builds(
    DocumentLimits,
    depth=st.integers(1, 5),
    key_chars=st.integers(1, 14),
    string_bytes=st.integers(0, 8),
    key_and_string_bytes=st.sampled_from([0, 6, 12]),
    leaves=st.integers(1, 8),
    nul=st.booleans(),
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.text(max_size=4), json_values, max_size=4), small_limits, st.booleans())
def test_kernel_refuses_exactly_what_the_reference_refuses(
    doc: dict[str, Any], limits: DocumentLimits, as_text: bool
) -> None:
    item: Any = json.dumps(doc) if as_text else doc
    rows, refused = flatten_documents([item], 1, True, limits.as_tuple())
    try:
        leaves = flatten_document(doc, "document", limits)
    except (LimitExceededError, DocumentError):
        assert refused == [0]
        return
    assert refused == []
    assert [(r[1], r[2]) for r in rows[0]] == [(leaf.keystr, leaf.ord) for leaf in leaves]
