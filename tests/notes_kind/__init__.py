"""A toy data model, ``notes``, written as docs/contributing.md's worked example: lines of text
kept per object, read by SQL, loaded from and exported to text files, described, checked
and crash-tested, all from this folder. A package registers it through its
``tesseradb.kinds`` entry point (tests/test_new_kind.py makes one)."""

from tests.notes_kind._kind import NotesKind

__all__ = ["NotesKind"]
