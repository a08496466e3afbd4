"""Argo/SQL: the paper's query language over JSON collections, parsed by hand.

The grammar (keywords in any case; ``[...]`` optional, ``{...}`` repeated)::

    statement := insert | select | delete | update [";"]
    insert    := INSERT INTO name OBJECT json { [","] [OBJECT] json }
    select    := SELECT ("*" | item {"," item}) FROM name [[AS] alias]
                 [[INNER] JOIN name [AS] alias ON "(" path "=" path ")"]
                 [WHERE pred] [GROUP BY path] [ORDER BY key [ASC|DESC] {"," ...}]
                 [LIMIT int [OFFSET int]]
    item      := path [AS name] | (COUNT|SUM|AVG|MIN|MAX) "(" ("*" | path) ")" [AS name]
    delete    := DELETE FROM name [WHERE pred]
    update    := UPDATE name SET path "=" value {"," path "=" value} [WHERE pred]
    pred      := conj {OR conj};  conj := neg {AND neg};  neg := NOT neg | atom
    atom      := "(" pred ")" | EXISTS path | literal op ANY path
               | path op literal | literal op path | path [NOT] BETWEEN lit AND lit
               | path [NOT] LIKE string | path [NOT] IN "(" lit {"," lit} ")"
               | path IS [NOT] NULL
    path      := step {"." step | "[" int "]"};  step := word | `any key`

Strings are quoted with ``'`` or ``"`` (the paper writes ``"Lindsay" = ANY
kids``), a doubled quote standing for itself. ``?`` and ``:name`` are
parameters bound from ``params``. Values in INSERT and SET are JSON.
Negations are pushed to the leaves by De Morgan's laws (:func:`push_not`).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tesseradb.documents._keys import join_path
from tesseradb.errors import ArgoSyntaxError, DocumentError

__all__ = [
    "AGGREGATES",
    "And",
    "AnyCompare",
    "Between",
    "Compare",
    "Condition",
    "Delete",
    "Exists",
    "In",
    "Insert",
    "IsNull",
    "Join",
    "Like",
    "Not",
    "Or",
    "PathRef",
    "Select",
    "SelectItem",
    "Statement",
    "Update",
    "literal_type",
    "parse_statement",
    "push_not",
]

AGGREGATES = ("count", "sum", "avg", "min", "max")
COMPARISONS = ("=", "!=", "<", "<=", ">", ">=")
_NEGATED = {"=": "!=", "!=": "=", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}
_FLIPPED = {"=": "=", "!=": "!=", "<": ">", ">": "<", "<=": ">=", ">=": "<="}
Literal = str | int | float | bool


# --- the tree --------------------------------------------------------------------------


@dataclass(frozen=True)
class PathRef:
    """A path into a document; ``alias`` is the join side it names, if any."""

    steps: tuple[str | int, ...]
    alias: str | None = None

    @property
    def key(self) -> str:
        return join_path(self.steps)

    def __str__(self) -> str:
        return (f"{self.alias}." if self.alias else "") + self.key


@dataclass(frozen=True)
class Compare:
    path: PathRef
    op: str
    value: Literal


@dataclass(frozen=True)
class AnyCompare:
    """``value op ANY path``, held as "some element e of path has ``e op' value``"."""

    path: PathRef
    op: str  # with the element on the left
    value: Literal
    negated: bool = False  # no element does


@dataclass(frozen=True)
class Between:
    path: PathRef
    low: Literal
    high: Literal
    negated: bool = False


@dataclass(frozen=True)
class Like:
    path: PathRef
    pattern: str
    negated: bool = False


@dataclass(frozen=True)
class In:
    path: PathRef
    values: tuple[Literal, ...]
    negated: bool = False


@dataclass(frozen=True)
class IsNull:
    path: PathRef
    negated: bool = False


@dataclass(frozen=True)
class Exists:
    path: PathRef
    negated: bool = False


@dataclass(frozen=True)
class And:
    items: tuple[Condition, ...]


@dataclass(frozen=True)
class Or:
    items: tuple[Condition, ...]


@dataclass(frozen=True)
class Not:
    item: Condition


Condition = Compare | AnyCompare | Between | Like | In | IsNull | Exists | And | Or | Not


@dataclass(frozen=True)
class Insert:
    collection: str
    documents: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class SelectItem:
    path: PathRef | None  # None for COUNT(*)
    function: str | None = None  # an aggregate, lower case
    alias: str | None = None

    @property
    def name(self) -> str:
        if self.alias:
            return self.alias
        if self.function is None:
            assert self.path is not None
            return self.path.key
        return f"{self.function}({self.path if self.path is not None else '*'})"


@dataclass(frozen=True)
class Join:
    collection: str
    alias: str
    left: PathRef
    right: PathRef


@dataclass(frozen=True)
class Select:
    collection: str
    alias: str | None = None
    items: tuple[SelectItem, ...] | None = None  # None: *
    join: Join | None = None
    where: Condition | None = None
    group_by: PathRef | None = None
    order_by: tuple[tuple[PathRef, bool], ...] = ()  # (path, descending)
    limit: int | None = None
    offset: int = 0

    @property
    def is_aggregate(self) -> bool:
        return self.items is not None and any(i.function for i in self.items)


@dataclass(frozen=True)
class Delete:
    collection: str
    where: Condition | None = None


@dataclass(frozen=True)
class Update:
    collection: str
    assignments: tuple[tuple[PathRef, Any], ...] = field(default_factory=tuple)
    where: Condition | None = None


Statement = Insert | Select | Delete | Update


def push_not(pred: Condition, negate: bool = False) -> Condition:
    """``pred`` (negated if asked) with every NOT pushed to the leaves (De Morgan)."""
    if isinstance(pred, Not):
        return push_not(pred.item, not negate)
    if isinstance(pred, And | Or):
        items = tuple(push_not(p, negate) for p in pred.items)
        flip = isinstance(pred, And) == negate  # And negated -> Or, Or negated -> And
        return Or(items) if flip else And(items)
    if not negate:
        return pred
    if isinstance(pred, Compare):
        return replace(pred, op=_NEGATED[pred.op])
    assert not isinstance(pred, Not)
    return replace(pred, negated=not pred.negated)


# --- the lexer ---------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+|--[^\n]*)
  | (?P<number>-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)
  | (?P<word>[A-Za-z_][A-Za-z0-9_$]*)
  | (?P<quoted>`(?:[^`]|``)*`)
  | (?P<string>'(?:[^']|'')*'|"(?:[^"]|"")*")
  | (?P<param>\?|:[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op><>|!=|<=|>=|[=<>(),.\[\]*;])
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class Token:
    kind: str  # number, word, quoted, string, param, op, end
    text: str
    pos: int

    def is_word(self, *words: str) -> bool:
        return self.kind == "word" and self.text.upper() in words


MAX_PREDICATE_DEPTH = 100  # parentheses and NOTs around one predicate


class Parser:
    def __init__(self, text: str, params: Sequence[Any] | Mapping[str, Any] | None) -> None:
        self.text = text
        self.params = params
        self.param_index = 0
        self.pos = 0
        self._peeked: Token | None = None
        self.depth = 0  # predicates open (parentheses and NOTs) around the current one

    # --- errors ------------------------------------------------------------------------
    def error(self, message: str, pos: int | None = None) -> ArgoSyntaxError:
        at = self.peek().pos if pos is None else pos
        line = self.text.count("\n", 0, at) + 1
        column = at - (self.text.rfind("\n", 0, at) + 1) + 1
        return ArgoSyntaxError(message, line, column)

    # --- tokens ----------------------------------------------------------------------
    def peek(self) -> Token:
        if self._peeked is None:
            self._peeked = self._scan()
        return self._peeked

    def _scan(self) -> Token:
        while True:
            if self.pos >= len(self.text):
                return Token("end", "", len(self.text))
            match = _TOKEN.match(self.text, self.pos)
            if match is None:
                raise self.error(f"unexpected character {self.text[self.pos]!r}", self.pos)
            self.pos = match.end()
            kind = match.lastgroup or ""
            if kind != "ws":
                return Token(kind, match.group(), match.start())

    def next(self) -> Token:
        token = self.peek()
        self._peeked = None
        return token

    def accept_word(self, *words: str) -> bool:
        if self.peek().is_word(*words):
            self.next()
            return True
        return False

    def expect_word(self, word: str) -> None:
        if not self.accept_word(word):
            raise self.error(f"expected {word}, found {self.describe(self.peek())}")

    def accept_op(self, op: str) -> bool:
        token = self.peek()
        if token.kind == "op" and token.text == op:
            self.next()
            return True
        return False

    def expect_op(self, op: str) -> None:
        if not self.accept_op(op):
            raise self.error(f"expected {op!r}, found {self.describe(self.peek())}")

    @staticmethod
    def describe(token: Token) -> str:
        return "the end of the statement" if token.kind == "end" else repr(token.text)

    def json_value(self, what: str) -> Any:
        """A JSON value starting here (or a bound parameter); JSON is not tokenised."""
        start = self.value_start()
        self._peeked = None
        param = re.compile(r"\?|:[A-Za-z_][A-Za-z0-9_]*").match(self.text, start)
        if param is not None:
            self.pos = param.end()
            return self.bind(Token("param", param.group(), start))
        sql_literal = re.compile(r"'|(?i:true|false|null)\b").match(self.text, start)
        if sql_literal is not None:  # SQL spellings: 'text', TRUE, FALSE, NULL
            if sql_literal.group().lower() == "null":
                self.pos = sql_literal.end()
                return None
            self.pos = start
            return self.literal()
        decoder = json.JSONDecoder(parse_constant=lambda name: _no_constant(self, name, start))
        try:
            value, end = decoder.raw_decode(self.text, start)
        except json.JSONDecodeError as err:
            raise self.error(f"malformed JSON in {what}: {err.msg}", err.pos) from None
        except RecursionError:
            raise self.error(f"JSON nested too deeply in {what}", start) from None
        self.pos = end
        return value

    def value_start(self) -> int:
        if self._peeked is not None:
            return self._peeked.pos
        match = re.compile(r"(?:\s+|--[^\n]*)*").match(self.text, self.pos)
        return match.end() if match else self.pos

    def bind(self, token: Token) -> Any:
        if self.params is None:
            raise self.error(f"parameter {token.text} but no params were given", token.pos)
        if token.text == "?":
            if isinstance(self.params, Mapping):
                raise self.error("'?' needs params as a sequence", token.pos)
            if self.param_index >= len(self.params):
                raise self.error(f"parameter {self.param_index + 1} has no value", token.pos)
            value = self.params[self.param_index]
            self.param_index += 1
            return value
        if not isinstance(self.params, Mapping) or token.text[1:] not in self.params:
            raise self.error(f"parameter {token.text} has no value", token.pos)
        return self.params[token.text[1:]]

    # --- statements --------------------------------------------------------------------
    def statement(self) -> Statement:
        token = self.peek()
        if token.is_word("INSERT"):
            stmt: Statement = self.insert()
        elif token.is_word("SELECT"):
            stmt = self.select()
        elif token.is_word("DELETE"):
            stmt = self.delete()
        elif token.is_word("UPDATE"):
            stmt = self.update()
        else:
            raise self.error(
                f"expected INSERT, SELECT, DELETE or UPDATE, found {self.describe(token)}"
            )
        self.accept_op(";")
        if self.peek().kind != "end":
            raise self.error(f"unexpected {self.describe(self.peek())} after the statement")
        if isinstance(self.params, Sequence) and self.param_index < len(self.params):
            raise self.error(
                f"{len(self.params)} params given but the statement uses {self.param_index}",
                len(self.text),
            )
        return stmt

    def name(self, what: str) -> str:
        token = self.next()
        if token.kind == "word":
            return token.text
        if token.kind == "quoted":
            return token.text[1:-1].replace("``", "`")
        raise self.error(f"expected {what}, found {self.describe(token)}", token.pos)

    def insert(self) -> Insert:
        self.expect_word("INSERT")
        self.expect_word("INTO")
        collection = self.name("a collection name")
        documents = []
        self.expect_word("OBJECT")
        while True:
            start = self.value_start()
            value = self.json_value("OBJECT")
            if not isinstance(value, dict):
                raise self.error("OBJECT must be followed by a JSON object", start)
            documents.append(value)
            # JSON is not tokenised, so look at the raw text for what follows a value
            follow = re.compile(r"(?:\s+|--[^\n]*)*(,)?(?:\s+|--[^\n]*)*(OBJECT\b)?", re.IGNORECASE)
            match = follow.match(self.text, self.pos)
            if match is None or not (match.group(1) or match.group(2)):
                break
            self.pos = match.end()
        return Insert(collection, tuple(documents))

    def select(self) -> Select:
        self.expect_word("SELECT")
        items: list[SelectItem] | None = None
        if not self.accept_op("*"):
            items = [self.select_item()]
            while self.accept_op(","):
                items.append(self.select_item())
        self.expect_word("FROM")
        collection = self.name("a collection name")
        alias = self.alias()
        join = None
        if self.peek().is_word("INNER", "JOIN"):
            self.accept_word("INNER")
            self.expect_word("JOIN")
            other = self.name("a collection name")
            other_alias = self.alias()
            if alias is None or other_alias is None:
                raise self.error("a join names both sides: FROM c AS l JOIN c AS r")
            if other_alias == alias:
                raise self.error(f"both sides of the join are called {alias!r}")
            self.expect_word("ON")
            parens = self.accept_op("(")
            left = self.path((alias, other_alias))
            self.expect_op("=")
            right = self.path((alias, other_alias))
            if parens:
                self.expect_op(")")
            if left.alias is None or right.alias is None or left.alias == right.alias:
                raise self.error("ON compares a path of one side with a path of the other")
            if left.alias != alias:
                left, right = right, left
            join = Join(other, other_alias, left, right)
        aliases = (alias, join.alias) if join and alias else ()
        if items is not None and aliases:
            items = [self._aliased_item(i, aliases) for i in items]
        where = self.condition(aliases) if self.accept_word("WHERE") else None
        group_by = None
        if self.accept_word("GROUP"):
            self.expect_word("BY")
            group_by = self.path(aliases)
            if self.accept_op(","):
                raise self.error("GROUP BY takes one path")
        order_by = []
        if self.accept_word("ORDER"):
            self.expect_word("BY")
            while True:
                path = self.order_key(aliases)
                descending = self.accept_word("DESC")
                if not descending:
                    self.accept_word("ASC")
                order_by.append((path, descending))
                if not self.accept_op(","):
                    break
        limit, offset = None, 0
        if self.accept_word("LIMIT"):
            limit = self.count("LIMIT")
            if self.accept_word("OFFSET"):
                offset = self.count("OFFSET")
        select = Select(
            collection,
            alias,
            tuple(items) if items is not None else None,
            join,
            where,
            group_by,
            tuple(order_by),
            limit,
            offset,
        )
        self._check_select(select)
        return select

    def _aliased_item(self, item: SelectItem, aliases: tuple[str, ...]) -> SelectItem:
        if item.path is None or item.path.alias is not None:
            return item
        steps = item.path.steps
        if steps and steps[0] in aliases and len(steps) > 1:
            return replace(item, path=PathRef(steps[1:], str(steps[0])))
        raise self.error(f"in a join, {item.path} must start with {' or '.join(aliases)}")

    def _check_select(self, select: Select) -> None:
        if select.join is not None and (select.is_aggregate or select.group_by):
            raise self.error("aggregates over a join are not supported")
        if select.group_by is not None and not select.is_aggregate:
            raise self.error("GROUP BY needs an aggregate in the select list")
        if select.is_aggregate:
            assert select.items is not None
            for item in select.items:
                if item.function is None and (
                    select.group_by is None or item.path != select.group_by
                ):
                    raise self.error(f"{item.name} is neither aggregated nor the GROUP BY path")

    def order_key(self, aliases: Sequence[str]) -> PathRef:
        """A path, or an aggregate as written in the select list (held by its output name)."""
        token = self.peek()
        if token.kind == "word" and token.text.lower() in AGGREGATES and not aliases:
            item = self.select_item()
            if item.function is not None:
                return PathRef((item.name,))
            assert item.path is not None
            return item.path
        return self.path(aliases)

    def alias(self) -> str | None:
        if self.accept_word("AS"):
            return self.name("an alias")
        token = self.peek()
        if token.kind == "word" and not token.is_word(
            "INNER", "JOIN", "WHERE", "GROUP", "ORDER", "LIMIT", "ON"
        ):
            self.next()
            return token.text
        return None

    def count(self, what: str) -> int:
        token = self.next()
        value = self.bind(token) if token.kind == "param" else token.text
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise self.error(f"{what} takes a whole number", token.pos) from None
        if number < 0 or isinstance(value, bool) or str(number) != str(value).strip():
            raise self.error(f"{what} takes a whole number >= 0", token.pos)
        return number

    def select_item(self) -> SelectItem:
        token = self.peek()
        if token.kind == "word" and token.text.lower() in AGGREGATES:
            self.next()
            if self.accept_op("("):
                function = token.text.lower()
                if self.accept_op("*"):
                    if function != "count":
                        raise self.error(f"{function.upper()}(*) is not defined; name a path")
                    path = None
                else:
                    path = self.path(())
                self.expect_op(")")
                return SelectItem(path, function, self._item_alias())
            self._peeked = None
            self.pos = token.pos  # a key that happens to be called count, sum, ...
        return SelectItem(self.path(()), None, self._item_alias())

    def _item_alias(self) -> str | None:
        return self.name("an output name") if self.accept_word("AS") else None

    def delete(self) -> Delete:
        self.expect_word("DELETE")
        self.expect_word("FROM")
        collection = self.name("a collection name")
        where = self.condition(()) if self.accept_word("WHERE") else None
        return Delete(collection, where)

    def update(self) -> Update:
        self.expect_word("UPDATE")
        collection = self.name("a collection name")
        self.expect_word("SET")
        assignments = []
        while True:
            path = self.path(())
            self.expect_op("=")
            assignments.append((path, self.json_value("SET")))
            if not self.accept_op(","):
                break
        where = self.condition(()) if self.accept_word("WHERE") else None
        return Update(collection, tuple(assignments), where)

    # --- paths and literals --------------------------------------------------------------
    def path(self, aliases: Sequence[str]) -> PathRef:
        token = self.peek()
        if token.kind not in ("word", "quoted"):
            raise self.error(f"expected an attribute path, found {self.describe(token)}")
        steps: list[str | int] = [self.name("an attribute")]
        while True:
            if self.accept_op("."):
                steps.append(self.name("an attribute"))
            elif self.peek().kind == "op" and self.peek().text == "[":
                self.next()
                index = self.next()
                if index.kind != "number" or not index.text.isdigit():
                    raise self.error("an array subscript is a whole number >= 0", index.pos)
                steps.append(int(index.text))
                self.expect_op("]")
            else:
                break
        if aliases:
            if steps[0] in aliases and len(steps) > 1:
                return PathRef(tuple(steps[1:]), str(steps[0]))
            raise self.error(
                f"in a join, {join_path(tuple(steps))} must start with {' or '.join(aliases)}",
                token.pos,
            )
        return PathRef(tuple(steps))

    def literal(self) -> Literal:
        token = self.next()
        if token.kind == "number":
            text = token.text
            return int(text) if re.fullmatch(r"-?\d+", text) else float(text)
        if token.kind == "string":
            quote = token.text[0]
            return token.text[1:-1].replace(quote * 2, quote)
        if token.is_word("TRUE"):
            return True
        if token.is_word("FALSE"):
            return False
        if token.kind == "param":
            value = self.bind(token)
            if isinstance(value, str | bool | int | float):
                return value
            raise self.error(
                f"parameter {token.text} is {type(value).__name__}; "
                "comparisons take a string, number or boolean",
                token.pos,
            )
        if token.is_word("NULL"):
            raise self.error("compare with NULL using IS NULL or IS NOT NULL", token.pos)
        raise self.error(f"expected a literal, found {self.describe(token)}", token.pos)

    def is_literal_start(self) -> bool:
        token = self.peek()
        return token.kind in ("number", "string", "param") or token.is_word("TRUE", "FALSE")

    # --- predicates -------------------------------------------------------------------
    def condition(self, aliases: Sequence[str]) -> Condition:
        items = [self.conjunction(aliases)]
        while self.accept_word("OR"):
            items.append(self.conjunction(aliases))
        return items[0] if len(items) == 1 else Or(tuple(items))

    def conjunction(self, aliases: Sequence[str]) -> Condition:
        items = [self.negation(aliases)]
        while self.accept_word("AND"):
            items.append(self.negation(aliases))
        return items[0] if len(items) == 1 else And(tuple(items))

    def negation(self, aliases: Sequence[str]) -> Condition:
        if self.accept_word("NOT"):
            with self.nested():
                return Not(self.negation(aliases))
        return self.atom(aliases)

    @contextlib.contextmanager
    def nested(self) -> Iterator[None]:
        """One level deeper; past MAX_PREDICATE_DEPTH a syntax error, not a RecursionError."""
        if self.depth >= MAX_PREDICATE_DEPTH:
            raise self.error(f"predicates nest deeper than {MAX_PREDICATE_DEPTH} levels")
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def comparison_op(self) -> str:
        token = self.peek()
        if token.kind == "op" and token.text in (*COMPARISONS, "<>"):
            self.next()
            return "!=" if token.text == "<>" else token.text
        raise self.error(f"expected a comparison, found {self.describe(token)}")

    def atom(self, aliases: Sequence[str]) -> Condition:
        if self.accept_op("("):
            with self.nested():
                inner = self.condition(aliases)
            self.expect_op(")")
            return inner
        if self.accept_word("EXISTS"):
            return Exists(self.path(aliases))
        if self.is_literal_start():
            value = self.literal()
            op = self.comparison_op()
            if self.accept_word("ANY"):
                return AnyCompare(self.path(aliases), _FLIPPED[op], value)
            return Compare(self.path(aliases), _FLIPPED[op], value)
        path = self.path(aliases)
        negated = self.accept_word("NOT")
        if self.accept_word("BETWEEN"):
            low = self.literal()
            self.expect_word("AND")
            high = self.literal()
            if literal_type(low) != literal_type(high):
                raise self.error(f"BETWEEN bounds of {path} must have one type")
            return Between(path, low, high, negated)
        if self.accept_word("LIKE"):
            token = self.peek()
            pattern = self.literal()
            if not isinstance(pattern, str):
                raise self.error("LIKE takes a string pattern", token.pos)
            return Like(path, pattern, negated)
        if self.accept_word("IN"):
            self.expect_op("(")
            values = [self.literal()]
            while self.accept_op(","):
                values.append(self.literal())
            self.expect_op(")")
            return In(path, tuple(values), negated)
        if negated:
            raise self.error("expected BETWEEN, LIKE or IN after NOT")
        if self.accept_word("IS"):
            is_not = self.accept_word("NOT")
            self.expect_word("NULL")
            return IsNull(path, is_not)
        op = self.comparison_op()
        return Compare(path, op, self.literal())


def literal_type(value: Literal) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "num"
    return "str"


def _no_constant(parser: Parser, name: str, start: int) -> Any:
    raise parser.error(f"{name} is not JSON", start)


def parse_statement(
    text: str, params: Sequence[Any] | Mapping[str, Any] | None = None
) -> Statement:
    """The statement in ``text``; :class:`ArgoSyntaxError` (with line and column) if it is not one."""
    if not isinstance(text, str):
        raise DocumentError(f"an Argo/SQL statement is text, not {type(text).__name__}")
    return Parser(text, params).statement()
