"""Parse: the files of a Source into YAML documents, with the line each one starts at.

Hostile input is bounded: nesting, nodes per document and per run (aliases expanded), and
documents per run; nothing recurses per nesting level. Also the bounded readers of small
YAML and JSON inputs that do not come from a file (annotations, environment variables).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import yaml
from yaml.composer import ComposerError

from .bounded import DEPTH_CEILING, EmbeddedError
from .bounded import json_loads_bounded as json_loads_bounded  # its users import it here
from .errors import FieldPath, Problem
from .read import Source, SourceFile
from .settings import FileValue, RenderSettings

try:  # libyaml when present: several times faster
    from yaml import CSafeLoader as _BaseLoader
except ImportError:  # pragma: no cover - depends on the PyYAML build
    from yaml import SafeLoader as _BaseLoader  # type: ignore[assignment]


class _Loader(_BaseLoader):
    """Safe loader that keeps timestamps as written: Kubernetes fields holding dates are
    strings, and a datetime would come back out in another spelling."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
}


@dataclass(frozen=True)
class Document:
    file: SourceFile
    index: int  # position of the document in its file
    line: int  # 1-based line where the document starts
    data: Any


# ---------------------------------------------------------------------------- YAML
_MERGE_TAG = "tag:yaml.org,2002:merge"
_SCALAR_STATS = (1, 0)
_PLAIN_TAGS: dict[str, str] = {}
_PLAIN_TAGS_MAX = 65536


class _InputTooBig(Exception):
    """A document breaks a limit: the line and the problem to report."""

    def __init__(self, line: int | None, message: str, *, stop: bool = False) -> None:
        super().__init__(message)
        self.line = line
        #: stop reading the file: skipping the rest of a too-deep document would make libyaml
        #: scan all of it, and its scanner slows down with every open flow bracket
        self.stop = stop


#: a document's data not built from its events (``_Composed.data``)
_NOT_BUILT: Any = object()


@dataclass
class _Composed:
    """One YAML document composed from the event stream: its node, or its data when it was
    built straight from the events (neither: refused)."""

    index: int
    line: int
    node: yaml.Node | None
    problems: list[tuple[int, str]]  # (line, message): refused, or duplicate keys
    size: int = 0  # nodes, aliases counted as what they expand to
    stop: bool = False  # nothing after this document is read
    aliases: bool = False  # an alias refers to a node twice (PyYAML builds it once, shared)
    #: JSON data built from the events, without nodes (``_Composer._plain``)
    data: Any = _NOT_BUILT

    @property
    def present(self) -> bool:
        return self.node is not None or self.data is not _NOT_BUILT


class _Composer:
    """Builds YAML nodes from libyaml's event stream with an explicit stack.

    libyaml's own composer recurses once per nesting level (deep input crashes the
    process); here nothing recurses, nesting is bounded before anything is built, and the
    size of every node (aliases expanded) is known without expanding anything.
    """

    def __init__(self, loader: Any, max_depth: int, max_nodes: int, *, nodes: bool = False) -> None:
        self.loader = loader
        #: always compose nodes (the line of a field is wanted), never build data directly
        self.nodes = nodes
        #: events read by ``_plain`` before it gave up, for ``_compose`` to read first
        self.pending: deque[Any] = deque()
        self.max_depth = min(max_depth, DEPTH_CEILING)
        self.max_nodes = max_nodes
        #: id(collection) -> (size with aliases expanded, nesting depth below it)
        self.stats: dict[int, tuple[int, int]] = {}
        #: a plain scalar's tag by its text (our loader: its resolution is the text's alone)
        self.plain_tags: dict[str, str] = _PLAIN_TAGS if type(loader) is _Loader else {}

    def documents(self) -> Iterator[_Composed]:
        loader = self.loader
        index = 0
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, yaml.DocumentStartEvent):
                mark: Any = event.start_mark
                composed = self._document(index, mark.line + 1)
                yield composed
                if composed.stop:
                    return
                index += 1

    def _document(self, index: int, line: int) -> _Composed:
        doc = _Composed(index, line, None, [])
        if not self.nodes and self._plain(doc):
            return doc
        try:
            doc.node, doc.size = self._compose(doc)
        except _InputTooBig as exc:
            doc.problems.append((exc.line or line, str(exc)))
            if exc.stop:
                doc.stop = True
                doc.problems.append((exc.line or line, "the rest of this file is not read"))
            else:
                self._skip_document()
        self.stats.clear()
        self.pending.clear()
        return doc

    def _next_event(self) -> Any:
        """The next event: those ``_plain`` read first."""
        return self.pending.popleft() if self.pending else self.loader.get_event()

    def _skip_document(self) -> None:
        while not isinstance(self._next_event(), yaml.DocumentEndEvent):
            pass

    def _plain(self, doc: _Composed) -> bool:
        """Build the document's data straight from the events (``doc.data``, ``doc.size``)
        when it is plain JSON data: no anchor, alias or tag, string keys, no key twice,
        within the limits (nodes cost more than the data they make; ``locate`` re-reads
        the file for a line). At anything else, False: the events read so far stay in
        ``pending`` for :meth:`_compose`, which reports what there is to report."""
        get_event = self.loader.get_event
        record = self.pending.append
        plain_tags = self.plain_tags
        max_depth, max_nodes = self.max_depth, self.max_nodes
        stack: list[Any] = []  # the open collections
        keys: list[Any] = []  # per open collection: a mapping's pending key, or _NOT_BUILT
        size = 0
        value: Any
        while True:
            event = get_event()
            record(event)
            kind = type(event)
            if kind is yaml.ScalarEvent:  # the common case first, inline: it is most events
                if event.anchor is not None or event.tag is not None:
                    return False
                value = event.value
                if event.implicit[0]:  # plain: resolved by its text (quoted: a string)
                    tag = plain_tags.get(value) or self._plain_tag(value)
                    if tag != _STR_TAG:
                        value = None if tag == _NULL_TAG else self._plain_scalar(tag, value)
                        if value is _NOT_BUILT:
                            return False
                size += 1
            elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
                if event.anchor is not None or event.tag is not None or len(stack) >= max_depth:
                    return False
                size += 1
                stack.append({} if kind is yaml.MappingStartEvent else [])
                keys.append(_NOT_BUILT)
                continue
            elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
                value, _ = stack.pop(), keys.pop()
            elif kind is yaml.DocumentEndEvent:
                self.pending.clear()
                return True
            else:  # an alias
                return False
            if size > max_nodes:
                return False
            if not stack:
                doc.data, doc.size = value, size
                continue
            parent = stack[-1]
            if type(parent) is list:
                parent.append(value)
            elif keys[-1] is _NOT_BUILT:
                if type(value) is not str:
                    return False  # a key that is no string: not JSON
                keys[-1] = value
            elif keys[-1] in parent:
                return False  # the node path reports the duplicate
            else:
                parent[keys[-1]] = value
                keys[-1] = _NOT_BUILT

    def _plain_tag(self, text: str) -> str:
        """The tag a plain scalar resolves to (our loader: by its text alone, kept)."""
        tag: str = self.loader.resolve(yaml.ScalarNode, text, (True, False))
        if len(self.plain_tags) >= _PLAIN_TAGS_MAX:
            self.plain_tags.clear()
        self.plain_tags[text] = tag
        return tag

    def _plain_scalar(self, tag: str, text: str) -> Any:
        """A boolean or finite number built by the loader's own constructor, else
        ``_NOT_BUILT`` (a merge or value key, an unknown resolution, NaN or infinity, a
        text its constructor refuses: the node path reports what is to report)."""
        if tag not in _SCALAR_TAGS:
            return _NOT_BUILT
        loader = self.loader
        try:
            value = loader.yaml_constructors[tag](loader, yaml.ScalarNode(tag, text))
        except Exception:  # the node path reports it
            return _NOT_BUILT
        if type(value) is float and (value != value or value in _INF):
            return _NOT_BUILT  # not JSON
        return value

    def _compose(self, doc: _Composed) -> tuple[yaml.Node, int]:
        """The document's node (the events ``_plain`` read first, then the rest) and its
        size, aliases expanded; raises :class:`_InputTooBig` at a limit."""
        get_event = self._next_event if self.pending else self.loader.get_event
        anchors: dict[str, yaml.Node] = {}
        open_ids: set[int] = set()  # the anchored collections still open (no alias to them)
        # stack of [collection node, pending mapping key or None]
        stack: list[list[Any]] = []
        root: yaml.Node | None = None
        while True:
            event = get_event()
            kind = type(event)
            node: yaml.Node
            if kind is yaml.ScalarEvent:  # the common case first
                node = self._scalar_node(event)
                if event.anchor is not None:
                    anchors[event.anchor] = node  # a later anchor of a name wins (YAML 1.2)
            elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
                self._check_depth(len(stack) + 1, event)
                coll = self._collection_node(event)
                if event.anchor is not None:
                    anchors[event.anchor] = coll
                    open_ids.add(id(coll))
                stack.append([coll, None])
                continue
            elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
                node = stack.pop()[0]
                node.end_mark = event.end_mark
                open_ids.discard(id(node))
                self._finish(node, doc)
            elif kind is yaml.AliasEvent:
                doc.aliases = True
                node = self._alias_node(event, anchors, open_ids)
                self._check_depth(len(stack) + self._stats(node)[1], event)
            else:  # DocumentEndEvent: libyaml sends nothing else inside a document
                assert root is not None
                return root, self._stats(root)[0]
            if stack:
                _attach(stack[-1], node)
                continue
            root = node
            if self._stats(root)[0] > self.max_nodes:
                raise _InputTooBig(None, self._too_many(self._stats(root)[0]))

    def _scalar_node(self, event: Any) -> yaml.ScalarNode:
        tag = event.tag
        if tag is None or tag == "!":
            if event.implicit[0]:  # plain: resolved by its text
                tag = self.plain_tags.get(event.value) or self._plain_tag(event.value)
            else:
                tag = self.loader.resolve(yaml.ScalarNode, event.value, event.implicit)
        start: Any = event.start_mark  # libyaml's marks, typed apart from PyYAML's
        return yaml.ScalarNode(tag, event.value, start, event.end_mark, style=event.style)

    def _collection_node(self, event: Any) -> yaml.Node:
        kind = yaml.MappingNode if type(event) is yaml.MappingStartEvent else yaml.SequenceNode
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.loader.resolve(kind, None, True)
        start: Any = event.start_mark
        return kind(tag, [], start, None, flow_style=event.flow_style)

    def _alias_node(
        self, event: Any, anchors: dict[str, yaml.Node], open_ids: set[int]
    ) -> yaml.Node:
        """The node an alias refers to: a finished one (an open one would make the data
        contain itself)."""
        start: Any = event.start_mark
        if event.anchor not in anchors:
            raise ComposerError(None, None, f"found undefined alias {event.anchor!r}", start)
        node = anchors[event.anchor]
        if id(node) in open_ids:
            raise ComposerError(
                None,
                None,
                f"alias {event.anchor!r} refers to a node that contains it (a recursive structure)",
                start,
            )
        return node

    def _stats(self, node: yaml.Node) -> tuple[int, int]:
        """(expanded size, height) of a finished node; a scalar's is (1, 0)."""
        return self.stats.get(id(node), _SCALAR_STATS)

    def _check_depth(self, depth: int, event: Any) -> None:
        if depth > self.max_depth:
            raise _InputTooBig(
                event.start_mark.line + 1,
                f"YAML nested more than {self.max_depth} levels deep (setting max-depth)",
                stop=True,
            )

    def _too_many(self, total: int) -> str:
        return (
            f"document expands to more than {self.max_nodes} YAML nodes through aliases "
            f"(at least {total}; setting max-yaml-nodes)"
        )

    def _finish(self, node: yaml.Node, doc: _Composed) -> None:
        """Size and height of a finished collection; duplicate keys reported."""
        size, height = 1, 0
        stats = self.stats
        if type(node) is yaml.MappingNode:
            seen: set[str] = set()
            for key, value in node.value:
                if type(key) is yaml.ScalarNode:
                    size += 1
                    if key.tag != _MERGE_TAG:
                        if key.value in seen:
                            doc.problems.append(
                                (key.start_mark.line + 1, f"duplicate key {key.value!r}")
                            )
                        seen.add(key.value)
                else:
                    csize, cheight = stats.get(id(key), _SCALAR_STATS)
                    size += csize
                    height = max(height, cheight)
                if type(value) is yaml.ScalarNode:
                    size += 1
                else:
                    csize, cheight = stats.get(id(value), _SCALAR_STATS)
                    size += csize
                    height = max(height, cheight)
        else:
            for child in node.value:
                if type(child) is yaml.ScalarNode:
                    size += 1
                else:
                    csize, cheight = stats.get(id(child), _SCALAR_STATS)
                    size += csize
                    height = max(height, cheight)
        if size > self.max_nodes:
            raise _InputTooBig(None, self._too_many(size))
        stats[id(node)] = (size, height + 1)


def _attach(top: list[Any], node: yaml.Node) -> None:
    """``node`` into the open collection ``top`` (``[collection, pending mapping key]``)."""
    parent = top[0]
    if type(parent) is yaml.SequenceNode:
        parent.value.append(node)
    elif top[1] is None:
        top[1] = node
    else:
        parent.value.append((top[1], node))
        top[1] = None


def _yaml_problem(path: str, exc: yaml.YAMLError) -> Problem:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    line = mark.line + 1 if mark is not None else 0
    what = getattr(exc, "problem", None) or str(exc)
    ctx = getattr(exc, "context", None)
    return Problem(path, line, message=f"malformed YAML: {what}" + (f" ({ctx})" if ctx else ""))


def parse(source: Source, settings: RenderSettings, problems: list[Problem]) -> list[Document]:
    """The parse stage: every document of ``source`` in (file, position) order, within the
    limits of ``settings``; problems are appended."""
    docs = parse_documents(
        source.files,
        max_documents=settings.max_documents,
        max_yaml_nodes=settings.max_yaml_nodes,
        max_total_yaml_nodes=settings.max_total_yaml_nodes,
        max_depth=settings.max_depth,
        problems=problems,
    )
    return sorted(docs, key=lambda d: (d.file.path, d.index))


#: the API group of kustomize's own files (Kustomization, Component): read by kustomize at
#: build time, never an object of a cluster
KUSTOMIZE_CONFIG_GROUP = "kustomize.config.k8s.io"


def holds_object(f: SourceFile, settings: RenderSettings) -> bool:
    """Whether a file holds a Kubernetes object (apiVersion and kind, not a kustomize
    file's): one that does is rendered whatever its name. Read within the limits of
    ``settings``; a file that is no YAML holds none."""
    problems: list[Problem] = []
    docs = parse_documents(
        [f],
        max_documents=settings.max_documents,
        max_yaml_nodes=settings.max_yaml_nodes,
        max_depth=settings.max_depth,
        problems=problems,
    )
    for doc in docs:
        data = doc.data
        if isinstance(data, dict) and data.get("apiVersion") and data.get("kind"):
            group = str(data["apiVersion"]).partition("/")[0]
            if group != KUSTOMIZE_CONFIG_GROUP:
                return True
    return False


def parse_documents(
    files: Sequence[SourceFile],
    *,
    max_documents: int,
    max_yaml_nodes: int,
    problems: list[Problem],
    max_depth: int,
    max_total_yaml_nodes: int | None = None,
) -> list[Document]:
    """Parse every file into documents; problems are appended, never raised.

    Limits: nesting (``max_depth``), nodes per document and per call, aliases expanded
    (``max_yaml_nodes``, ``max_total_yaml_nodes``), documents per call.
    """
    budget = max_total_yaml_nodes if max_total_yaml_nodes is not None else max_yaml_nodes
    run = _Run(max_documents, budget, problems)
    for f in files:
        if f.text.strip() and not _parse_file(f, run, max_depth, max_yaml_nodes):
            break  # a limit of the run: nothing more is read
    return run.docs


@dataclass
class _Run:
    """The documents of one :func:`parse_documents` call and what they used of its limits."""

    max_documents: int
    budget: int  # YAML nodes, aliases expanded
    problems: list[Problem]
    docs: list[Document] = field(default_factory=list)
    used: int = 0


def _parse_file(f: SourceFile, run: _Run, max_depth: int, max_nodes: int) -> bool:
    """The documents of one file into ``run``; False when a limit of the run is reached."""
    loader = _Loader(f.text)
    try:
        for composed in _Composer(loader, max_depth, max_nodes).documents():
            if composed.present and len(run.docs) >= run.max_documents:
                message = (
                    f"more than {run.max_documents} documents in this run (setting max-documents)"
                )
                run.problems.append(Problem(f.path, composed.line, message=message))
                return False
            run.problems.extend(
                Problem(f.path, line, message=msg) for line, msg in composed.problems
            )
            if composed.problems or not composed.present:
                continue
            run.used += composed.size
            if run.used > run.budget:
                message = (
                    f"the documents read so far expand to more than {run.budget} YAML nodes "
                    "through aliases (setting max-total-yaml-nodes)"
                )
                run.problems.append(Problem(f.path, composed.line, message=message))
                return False
            data = _construct(loader, composed, f.path, run.problems)
            if data is not None:
                run.docs.append(Document(f, composed.index, composed.line, data))
    except yaml.YAMLError as exc:
        run.problems.append(_yaml_problem(f.path, exc))
    finally:
        loader.dispose()
    return True


def _construct(loader: Any, composed: _Composed, path: str, problems: list[Problem]) -> Any:
    """The document's data, or None (with problems) when it is not plain JSON data."""
    if composed.data is not _NOT_BUILT:
        return composed.data  # JSON data by construction (_Composer._plain)
    node = composed.node
    assert node is not None
    data = _NOT_PLAIN if composed.aliases else _plain_data(loader, node)
    if data is _NOT_PLAIN:
        try:
            data = loader.construct_document(node)
        except Exception as exc:  # PyYAML's constructors applied to hostile
            # input fail in many ways ("!foo x", "!!int abc", "!!float x", an integer with too
            # many digits, an empty "!!int" -> IndexError): each is the input's fault, never ours
            line, message = _unreadable(node, exc)
            problems.append(Problem(path, line, message=message))
            loader.state_generators = []
            loader.constructed_objects = {}
            loader.recursive_objects = {}
            return None
    found = not_json(data)
    if found:
        problems.extend(replace(p, file=path, line=_line_at(node, p.path)) for p in found)
        return None
    return data


_NOT_PLAIN: Any = object()
_STR_TAG = "tag:yaml.org,2002:str"
_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_NULL_TAG = "tag:yaml.org,2002:null"
#: scalars built by the loader's own constructors (from the text alone)
_SCALAR_TAGS = frozenset(
    ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
)
#: keys PyYAML's ``flatten_mapping`` rewrites: merge (``<<``) and value (``=``)
_FLATTENED = (_MERGE_TAG, "tag:yaml.org,2002:value")


def _plain_data(loader: Any, node: yaml.Node) -> Any:
    """What ``loader.construct_document(node)`` builds, for the common document (mappings,
    sequences, strings, null, booleans and numbers under their standard tags, no merge key;
    the caller leaves out documents with aliases, whose nodes PyYAML builds once and
    shares), or ``_NOT_PLAIN``: then PyYAML's constructor builds (or refuses) it. PyYAML
    runs a generator per collection and bookkeeping per node; this builds directly, one
    call per nesting level (bounded by DEPTH_CEILING). No closure: a render runs without
    the cyclic collector (oneshot.py), and a self-referencing one would keep the loader."""
    try:
        return _build_plain(loader, node)
    except Exception:  # a scalar its constructor refuses: PyYAML's path reports it
        return _NOT_PLAIN


def _build_plain(loader: Any, node: yaml.Node) -> Any:
    kind, tag = type(node), node.tag
    if kind is yaml.ScalarNode:
        if tag == _STR_TAG:
            return node.value
        if tag == _NULL_TAG:
            return None
        if tag in _SCALAR_TAGS:
            return loader.yaml_constructors[tag](loader, node)
        return _NOT_PLAIN
    if kind is yaml.MappingNode and tag == _MAP_TAG:
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if type(key_node) is not yaml.ScalarNode or key_node.tag in _FLATTENED:
                return _NOT_PLAIN
            key, value = _build_plain(loader, key_node), _build_plain(loader, value_node)
            if key is _NOT_PLAIN or value is _NOT_PLAIN:
                return _NOT_PLAIN
            out[key] = value
        return out
    if kind is yaml.SequenceNode and tag == _SEQ_TAG:
        items = []
        for item_node in node.value:
            item = _build_plain(loader, item_node)
            if item is _NOT_PLAIN:
                return _NOT_PLAIN
            items.append(item)
        return items
    return _NOT_PLAIN


def _unreadable(node: yaml.Node, exc: BaseException) -> tuple[int, str]:
    """Where and why a document cannot be built; the value itself is not repeated (it may
    be a secret)."""
    if isinstance(exc, RecursionError):
        return int(node.start_mark.line) + 1, "nested too deeply (merge keys)"
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        line = exc.problem_mark.line + 1
        if exc.problem and "constructor for the tag" in exc.problem:
            return line, f"unknown YAML tag {_short_tag(exc.problem)}"
        return line, f"cannot read a value: {exc.problem}"
    bad = _failed_scalar(node)
    if bad is None:
        return int(node.start_mark.line) + 1, f"cannot read a value ({type(exc).__name__})"
    why = "too many digits" if "digits" in str(exc) else "not a valid value for its tag"
    return int(
        bad.start_mark.line
    ) + 1, f"value tagged {_short_tag(bad.tag)} cannot be read ({why})"


def _short_tag(text: str) -> str:
    return text.replace("tag:yaml.org,2002:", "!!").removeprefix(
        "could not determine a constructor for the tag "
    )


def _failed_scalar(node: yaml.Node) -> yaml.Node | None:
    """The first scalar whose tag cannot be built from its text."""
    stack = [node]
    seen: set[int] = set()
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, yaml.ScalarNode):
            try:
                _Loader.yaml_constructors.get(n.tag, _fail)(_PROBE, n)
            except Exception:  # any failure marks the culprit
                return n
        elif isinstance(n, yaml.MappingNode):
            stack.extend(x for pair in reversed(n.value) for x in reversed(pair))
        elif isinstance(n, yaml.SequenceNode):
            stack.extend(reversed(n.value))
    return None


def _fail(_loader: Any, _node: Any) -> Any:
    raise ValueError("no constructor")


_PROBE = yaml.SafeLoader("")


def _line_at(node: yaml.Node, loc: Sequence[str | int]) -> int:
    return _walk_nodes(node, loc)[1]


def not_json(data: Any, max_problems: int = 20) -> list[Problem]:
    """Where ``data`` holds something JSON (and so Kubernetes) cannot: non-string keys,
    bytes, sets, dates, pairs, NaN or infinity. Walks without recursion."""
    if _plain_json(data):  # the common case, told without building every field's path
        return []
    found: list[Problem] = []
    stack: list[tuple[FieldPath, Any]] = [((), data)]
    while stack and len(found) < max_problems:
        loc, value = stack.pop()
        if isinstance(value, dict):
            for k, v in reversed(list(value.items())):
                if not isinstance(k, str):
                    found.append(
                        Problem.at(loc, f"mapping key {k!r} is {_what(k)}, not a string; quote it")
                    )
                    continue
                stack.append(((*loc, k), v))
        elif isinstance(value, list):
            stack.extend(((*loc, i), v) for i, v in reversed(list(enumerate(value))))
        elif isinstance(value, float):
            if value != value or value in (float("inf"), float("-inf")):
                found.append(
                    Problem.at(
                        loc, "NaN and infinity are not numbers JSON (and so Kubernetes) can carry"
                    )
                )
        elif value is not None and not isinstance(value, str | int):
            found.append(
                Problem.at(
                    loc,
                    f"{_what(value)} is not a JSON value (strings, "
                    "numbers, booleans, null, lists and mappings only)",
                )
            )
    return found


_INF = (float("inf"), float("-inf"))


def _plain_json(data: Any) -> bool:
    """Whether ``data`` is JSON data through and through (:func:`not_json` finds nothing)."""
    stack = [data]
    pop, extend = stack.pop, stack.extend
    while stack:
        value = pop()
        kind = type(value)
        if kind is str or kind is int or kind is bool or value is None:
            continue
        if kind is dict:
            for k in value:
                if type(k) is not str:
                    return False
            extend(value.values())
        elif kind is list:
            extend(value)
        elif kind is float:
            if value != value or value in _INF:
                return False
        else:  # anything else (subclasses too) is for the full walk to judge
            return False
    return True


def _what(value: Any) -> str:
    names = {bytes: "binary data (!!binary)", set: "a set (!!set)", tuple: "a pair"}
    for kind, name in names.items():
        if isinstance(value, kind):
            return name
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return f"a {type(value).__name__}"


def _walk_nodes(node: yaml.Node | None, loc: Sequence[str | int]) -> tuple[bool, int]:
    """Follow ``loc`` down ``node``: (reached the end, line of the deepest node found)."""
    line = node.start_mark.line + 1 if node is not None else 0
    for part in loc:
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            nxt = None
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.value == part:
                    line = k.start_mark.line + 1
                    nxt = v
                    break
            if nxt is None:
                return False, line
            node = nxt
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if part >= len(node.value):
                return False, line
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return False, line
    return True, line


def located(doc: Document, problem: Problem) -> Problem:
    """``problem``, whose path is from the root of ``doc``, with the file, line and object."""
    return replace(
        problem, file=doc.file.path, line=locate(doc, problem.path), obj=object_label(doc.data)
    )


def object_label(data: Any) -> str:
    """``Kind/name`` of a document's object ("?" for what is missing), or "" for no object."""
    if isinstance(data, dict):
        kind = data.get("kind")
        meta = data.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        # only scalars: a mapping in the wrong place may hold anything, credentials included
        return f"{_scalar(kind)}/{_scalar(name)}"
    return ""


def _scalar(value: Any) -> str:
    return str(value) if isinstance(value, str | int | float) and value != "" else "?"


def locate(doc: Document, loc: Sequence[str | int]) -> int:
    """Line of the deepest node along ``loc`` in ``doc`` (re-parsed: errors are rare)."""
    loader = _Loader(doc.file.text)
    try:
        for composed in _Composer(loader, DEPTH_CEILING, 2**62, nodes=True).documents():
            if composed.index == doc.index:
                if composed.node is None:
                    return doc.line
                line = _walk_nodes(composed.node, loc)[1]
                return line or doc.line
    except yaml.YAMLError:
        pass
    finally:
        loader.dispose()
    return doc.line


def load_bounded(text: str, *, max_depth: int, max_nodes: int, what: str) -> Any:
    """One YAML (or JSON) document from a small input outside a file (an annotation, an
    environment variable); :class:`EmbeddedError` (a ValueError) with the problems."""
    problems: list[Problem] = []
    docs = parse_documents(
        [SourceFile(what, text)],
        max_documents=1,
        max_yaml_nodes=max_nodes,
        max_depth=max_depth,
        problems=problems,
    )
    if problems:
        raise EmbeddedError((), "; ".join(str(p) for p in problems))
    return docs[0].data if docs else None


# ---------------------------------------------------------------------------- dyn-gitops.yaml
#: fixed bounds: the settings file is parsed before any setting (limits included) is known
SETTINGS_FILE_MAX_NODES = 1_000
SETTINGS_FILE_MAX_DEPTH = 10


def settings_values(src: Source) -> dict[str, FileValue] | None:
    """The setting values of ``src``'s ``dyn-gitops.yaml`` (None: there is none, or it is
    unusable; its problems are added to ``src.problems``)."""
    if src.settings_file is None:
        return None
    return file_settings_values(src.settings_file, src.problems)


def _key_lines(doc: Document) -> dict[str, int]:
    """The line of each top-level key of a settings document (read again: it is small)."""
    loader = _Loader(doc.file.text)
    try:
        for composed in _Composer(loader, DEPTH_CEILING, 2**62, nodes=True).documents():
            node = composed.node
            if composed.index == doc.index and isinstance(node, yaml.MappingNode):
                return {
                    str(key.value): key.start_mark.line + 1
                    for key, _ in node.value
                    if isinstance(key, yaml.ScalarNode)
                }
    except yaml.YAMLError:  # pragma: no cover - the same text was just read without error
        pass
    finally:
        loader.dispose()
    return {}


def file_settings_values(file: SourceFile, problems: list[Problem]) -> dict[str, FileValue] | None:
    """The setting values of one ``dyn-gitops.yaml`` (the root's or a subtree's), each with
    its file and line; None: it is unusable (its problems are added to ``problems``)."""
    found: list[Problem] = []
    docs = parse_documents(
        [file],
        max_documents=1,
        max_yaml_nodes=SETTINGS_FILE_MAX_NODES,
        max_depth=SETTINGS_FILE_MAX_DEPTH,
        problems=found,
    )
    if found:
        problems.extend(found)
        return None
    data = docs[0].data if docs else None
    if data is None:
        return {}
    if not isinstance(data, dict):
        problems.append(
            Problem(file.path, 1, message="expected a mapping of setting names to values")
        )
        return None
    lines = _key_lines(docs[0])
    return {
        str(key): FileValue(raw, file.path, lines.get(str(key), docs[0].line))
        for key, raw in data.items()
    }
