"""The hall's registry: every kind, one cache of open objects, and the SQL engine's namespace.

:class:`Registry` is what the database delegates to. It keeps the kinds
(one instance of each per open database), opens an object the first time it
is asked for and caches it with its relations until the object is dropped or
the database closes, and answers the SQL engine's questions about names
(:class:`~tesseradb.sql.engine.Namespace`). It is also what kinds see as
:class:`~tesseradb.kinds.OpenObjects`: an array operator writing ``into=``
creates its result here, never through the database's user API.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tesseradb._lifetime import Lifetime
from tesseradb.catalog import Catalog, validate_name, with_article
from tesseradb.errors import (
    DatabaseClosedError,
    ObjectExistsError,
    ObjectNotFoundError,
    ReadOnlyError,
)
from tesseradb.executor import ExecutorSlot
from tesseradb.kinds import Kind, KindContext, ObjectInfo
from tesseradb.sql.tables import PLAIN_KINDS
from tesseradb.storage import Storage

if TYPE_CHECKING:
    from tesseradb.checks import Finding, Verified
    from tesseradb.sql.relation import Relation

    Strays = list[tuple[Path, str]]  # entries belonging to no object, and what is wrong

__all__ = ["Registry"]

SESSION_KIND = "relation"  # what kind_of says of a relation registered for the session


class Registry:
    """Kinds, open objects and session relations of one open database."""

    def __init__(
        self,
        path: Path,
        catalog: Catalog,
        read_only: bool,
        executors: ExecutorSlot,
        memory_limit: str | None = None,
        storage: Storage | None = None,
    ) -> None:
        self.catalog = catalog
        self.read_only = read_only
        self.closed = False
        self.lifetime = Lifetime(path)
        self.context = KindContext(
            path,
            read_only,
            self,
            self.touched,
            executors,
            self.lifetime,
            memory_limit,
            storage if storage is not None else Storage(None, None, "storage"),
        )
        # catalog kind -> the factory of its Kind; a room is imported when its kind is first needed
        self._factories: dict[str, Callable[[KindContext], Kind]] = {}
        self._kinds: dict[Callable[[KindContext], Kind], Kind] = {}  # factory -> its one instance
        self.session: dict[str, Relation] = {}  # registered relations by lower name
        self._open: dict[str, tuple[Kind, Any]] = {}  # lower name -> (kind, open object)
        self._relations: dict[str, Relation] = {}  # lower (dotted) name -> relation
        self._lock = threading.RLock()
        self._touched: dict[str, float] = {}  # name -> when `touched` last wrote it
        self.on_drop: list[Callable[[str], None]] = []  # told the name of a dropped object
        self._provisional = threading.local()  # .names: what `provisionally` made so far

    # --- guards ----------------------------------------------------------------------
    def check_open(self) -> None:
        if self.closed:
            raise DatabaseClosedError(f"database {self.context.path} is closed")

    def check_writable(self, what: str) -> None:
        if self.read_only:
            raise ReadOnlyError(f"cannot {what}: the database is open read-only")

    def declare(self, factory: Callable[[KindContext], Kind], *names: str) -> None:
        """Serve the catalog kinds ``names`` with the one Kind ``factory`` makes (when first needed)."""
        for name in names:
            self._factories[name] = factory

    def kind(self, name: str) -> Kind:
        factory = self._factories.get(name)
        if factory is None:
            raise ObjectNotFoundError(f"this version knows no kind of object called {name!r}")
        return self._made(factory)

    def capable(self, capability: type) -> dict[str, Any]:
        """Every kind with ``capability`` (a runtime-checkable protocol of
        :mod:`tesseradb.kinds`), by its catalog name, in the order they were declared
        (each room is imported now)."""
        found: dict[str, Any] = {}
        for name, factory in self._factories.items():
            made = self._made(factory)
            if made.name == name and isinstance(made, capability):
                found[name] = made
        return found

    def _made(self, factory: Callable[[KindContext], Kind]) -> Kind:
        with self._lock:
            made = self._kinds.get(factory)
            if made is None:
                made = self._kinds[factory] = factory(self.context)
            return made

    # --- OpenObjects: what kinds may ask of the hall -----------------------------------
    def get(self, name: str, kind: str | None = None) -> Any:
        """The open object called ``name`` (of ``kind`` if given), opened now if need be."""
        self.check_open()
        key = name.lower()
        cached = self._open.get(key)
        if cached is not None and (kind is None or kind in (cached[0].name, *cached[0].aliases)):
            return cached[1]
        obj = self.catalog.require(name, kind)
        with self._lock:
            cached = self._open.get(key)
            if cached is None:
                owner = self.kind(obj.kind)
                opened = owner.open(obj.name, obj.spec)
                if hasattr(type(opened), "_lifetime"):  # (it refuses every call once closed)
                    opened._lifetime = self.lifetime
                for suffix, relation in owner.relations(opened).items():
                    self._relations[f"{key}.{suffix.lower()}" if suffix else key] = relation
                cached = self._open[key] = (owner, opened)
            return cached[1]

    def peek(self, name: str) -> Any | None:
        cached = self._open.get(name.lower())
        return None if cached is None else cached[1]

    def forget(self, name: str) -> None:
        key = name.lower()
        with self._lock:
            self._open.pop(key, None)
            for relation in [r for r in self._relations if r == key or r.startswith(key + ".")]:
                del self._relations[relation]

    def create(self, kind: str, name: str, spec: dict[str, Any]) -> Any:
        """Create an object: its storage (the kind), then its catalog entry; all or nothing."""
        self.check_open()
        owner = self.kind(kind)
        self.check_writable(f"create {kind} {name!r}")
        validate_name(name, kind)
        with self._lock:
            existing = self.catalog.get(name)
            if existing is not None or name.lower() in self.session:
                what = (
                    with_article(existing.kind) if existing is not None else "a registered relation"
                )
                shown = existing.name if existing is not None else name
                raise ObjectExistsError(
                    f"cannot create {kind} {name!r}: {shown!r} already exists ({what})"
                )
            # where its bulk data goes (a kind that keeps data in object storage records
            # the location in the spec), decided before anything is written
            placed = getattr(owner, "placed", None)
            if placed is not None:
                spec = placed(name, spec)
            # the entry first, pending: a writer killed before the object is whole leaves
            # an entry the next writer drops (settle_leftovers), never a nameless folder
            self.catalog.create(name, kind, spec, pending=True)
            try:
                owner.create(name, spec)
            except BaseException:
                self.catalog.drop(name)
                raise
            scope = getattr(self._provisional, "names", None)
            if scope is None:
                self.catalog.settle(name)
            else:
                scope.append(name)
        return self.get(name)

    @contextlib.contextmanager
    def provisionally(self) -> Iterator[None]:
        """Objects this thread creates in the block are seen by other processes only when it
        ends without an error; on an error they are dropped, and a writer killed in the
        block leaves them for the next writer to drop. What a load makes is whole or gone."""
        if getattr(self._provisional, "names", None) is not None:
            yield  # (an outer block decides)
            return
        names: list[str] = []
        self._provisional.names = names
        try:
            yield
        except BaseException:
            for name in names:
                with contextlib.suppress(ObjectNotFoundError):
                    self.drop(name)
            raise
        finally:
            self._provisional.names = None
        for name in names:
            if self.catalog.get(name) is not None:
                self.catalog.settle(name)

    def settle_leftovers(self) -> list[str]:
        """Drop the objects a killed writer left pending (never acknowledged to anyone): run
        by a writer as it opens; the names dropped."""
        from tesseradb.errors import TesseraError

        dropped = []
        for obj in self.catalog.pending():
            if obj.kind in self._factories:
                with contextlib.suppress(TesseraError, OSError):
                    self.kind(obj.kind).drop(obj.name, obj.spec, None)
            self.catalog.drop(obj.name)
            dropped.append(obj.name)
        return dropped

    def drop(self, name: str) -> None:
        """Remove the object called ``name``, of any kind: storage, cache and catalog entry."""
        self.check_open()
        obj = self.catalog.require(name)
        self.check_writable(f"drop {name!r}")
        owner = self.kind(obj.kind)
        with self._lock:
            cached = self._open.get(obj.name.lower())
            self.forget(obj.name)
            owner.drop(obj.name, obj.spec, None if cached is None else cached[1])
            with contextlib.suppress(ObjectNotFoundError):  # a plain table's DROP syncs it
                self.catalog.drop(obj.name)
        for listener in self.on_drop:
            listener(obj.name)

    def update_spec(self, name: str, spec: dict[str, Any]) -> None:
        """A kind's object changed its spec (an attachment's new index)."""
        self.catalog.update_spec(name, spec)

    # --- relations registered for the session -----------------------------------------
    def register(self, name: str, relation: Relation) -> None:
        """(``name`` validated by the caller)"""
        with self._lock:
            if self.catalog.get(name) is not None:
                raise ObjectExistsError(
                    f"cannot register {name!r}: the database has an object of that name"
                )
            if name.lower() in self.session:
                raise ObjectExistsError(
                    f"a relation named {name!r} is already registered; unregister it first"
                )
            self.session[name.lower()] = relation

    def registered(self, name: str) -> bool:
        """Whether a relation is registered under ``name`` (db.register or a temporary one)."""
        with self._lock:
            return name.lower() in self.session

    def register_temporary(self, name: str, relation: Relation) -> None:
        """Register ``relation``, replacing one registered under ``name`` before (a kind's
        temporary object made again; the caller checked the name is not an object's)."""
        with self._lock:
            self.session[name.lower()] = relation

    def unregister(self, name: str) -> None:
        with self._lock:
            if self.session.pop(name.lower(), None) is None:
                raise ObjectNotFoundError(f"no registered relation named {name!r}")

    # --- the SQL engine's namespace ---------------------------------------------------
    def relation(self, name: str) -> Relation | None:
        """The relation called ``name`` (case-insensitive), or None if there is none."""
        key = name.lower()
        found = self.session.get(key) or self._relations.get(key)
        if found is not None:
            return found
        owner = key.partition(".")[0]
        if owner in self._open or self.catalog.peek(owner) is None:
            return None
        self.get(owner)
        return self._relations.get(key)

    def kind_of(self, name: str) -> str | None:
        if name.lower() in self.session:
            return SESSION_KIND
        obj = self.catalog.peek(name)
        if obj is not None:
            return obj.kind
        owner = name.partition(".")[0]
        if "." in name and self.relation(name) is not None:
            return f"{self.catalog.require(owner).kind} table"
        return None

    def known_names(self) -> list[str]:
        names = {r.name for r in self.session.values()}
        for obj in self.catalog.objects():
            names.add(obj.name)
            if obj.kind in self._factories:
                names.update(self.kind(obj.kind).relation_names(obj.name, obj.spec))
        return sorted(names)

    def columns_of(self, name: str) -> list[str] | None:
        obj = self.catalog.peek(name)
        if obj is None or obj.kind not in PLAIN_KINDS or "columns" not in obj.spec:
            return None
        return list(obj.spec["columns"])

    def sync_tables(
        self, tables: dict[str, tuple[str, list[str]]], written: Sequence[str] = ()
    ) -> None:
        self.catalog.sync_kinds(
            PLAIN_KINDS,
            {n: (kind, {"columns": cols}) for n, (kind, cols) in tables.items()},
        )
        known = {n.lower(): n for n in tables}
        for name in written:
            if name.lower() in known:
                # (at most once a second, like every kind: a commit per INSERT was the
                # slowest part of a served database's small writes)
                self.touched(known[name.lower()])

    def rows_written(self, names: Sequence[str]) -> None:
        """Plain tables whose rows a statement changed, not their columns: their modified
        time moves (as :meth:`sync_tables` moves it after a statement that may make tables)."""
        for name in names:
            obj = self.catalog.get(name)
            if obj is not None and obj.kind in PLAIN_KINDS:
                self.touched(obj.name)

    def touched(self, name: str, at_once: bool = False) -> None:
        """Record that ``name`` changed (ObjectInfo.modified): at most once a second per
        object, so that a stream of small writes does not become catalog writes."""
        now = time.monotonic()
        if self.read_only or (not at_once and now - self._touched.get(name, -2.0) < 1.0):
            return
        self._touched[name] = now
        with contextlib.suppress(ObjectNotFoundError):
            self.catalog.touch(name)

    def details(self, name: str) -> dict[str, Any]:
        """``name``'s name and kind, and what its kind adds (:class:`~tesseradb.kinds.Describing`)."""
        from tesseradb.kinds import Describing

        self.check_open()
        obj = self.catalog.require(name)
        out: dict[str, Any] = {"name": obj.name, "kind": obj.kind}
        owner = self.kind(obj.kind)
        if isinstance(owner, Describing):
            out.update(owner.details(obj.name, self.get(obj.name)))
        return out

    # --- every object ----------------------------------------------------------------
    def _by_kind(self, every: bool) -> tuple[list[Any], list[tuple[Kind, list[Any]]]]:
        """The catalog's objects, and each kind with its objects (``every`` kind, or only
        those that have objects: a room is not imported to list nothing)."""
        objects = self.catalog.objects()
        grouped: dict[Callable[[KindContext], Kind], list[Any]] = (
            {factory: [] for factory in self._factories.values()} if every else {}
        )
        for obj in objects:
            factory = self._factories.get(obj.kind)
            if factory is not None:
                grouped.setdefault(factory, []).append(obj)
        return objects, [(self._made(factory), group) for factory, group in grouped.items()]

    def describe(self) -> list[ObjectInfo]:
        """Every object of the catalog (in its order), then the session's relations."""
        objects, kinds = self._by_kind(every=False)
        described: dict[str, list[ObjectInfo]] = {}
        for owner, group in kinds:
            for info in owner.describe(group):
                described.setdefault(info.name.partition(".")[0].lower(), []).append(info)
        infos = [info for obj in objects for info in described.get(obj.name.lower(), [])]
        for relation in self.session.values():
            estimate = relation.estimate(None)
            infos.append(
                ObjectInfo(
                    relation.name,
                    "relation (this session)",
                    estimate.rows,
                    estimate.bytes,
                    None,
                    None,
                )
            )
        return infos

    def check(self, repair: bool) -> tuple[list[Finding], list[Verified], list[Path], Strays]:
        """Every kind's check of its objects; then the layout: every kind's directory and
        what in it belongs to no object (see :meth:`Kind.strays`)."""
        objects, kinds = self._by_kind(every=True)
        findings: list[Finding] = []
        verified: list[Verified] = []
        for owner, group in kinds:
            found, ok = owner.check(group, repair)
            findings.extend(found)
            verified.extend(ok)
        directories: list[Path] = []
        strays: Strays = []
        for factory in dict.fromkeys(self._factories.values()):
            made = self._made(factory)
            if made.directory is None:
                continue
            directories.append(self.context.path / made.directory)
            names = [o.name for o in objects if o.kind in (made.name, *made.aliases)]
            strays.extend(made.strays(names))
        return findings, verified, directories, strays

    def close(self) -> None:
        """Close every open object, then what each kind shares."""
        self.closed = True
        with self._lock:
            opened = list(self._open.values())
            self._open.clear()
            self._relations.clear()
        try:
            for owner, obj in opened:
                owner.close(obj)
            for made in list(self._kinds.values()):
                made.shutdown()
        finally:
            self.lifetime.closed = True  # every handle given out refuses from now on
