"""``adopt --check``: what applying the render over what the Dynamo operator created would do,
on plain dicts (the live objects as ``kubectl get -o yaml`` prints them, the rendered ones).

The apply is modelled as a server-side apply with ``--force-conflicts`` by a new field
manager (Argo CD's ``argocd-controller``, Flux's ``kustomize-controller``): every field the
render sets takes the rendered value; a field only the live object has stays (the operator
wrote it with a plain update, upstream ``internal/controller_common/resource.go``
``SyncObservedResource`` at 2a6da14c8: ``r.Create``/``r.Update``, field manager ``manager``,
the binary's name in ``deploy/operator/Dockerfile``), and so does a value the API server
defaulted. Keyed lists (containers, env, ports, volumes, ...) merge item by item; any other
list is replaced unless each rendered item is already within the live one.

Each finding has an *effect*; the first three disrupt a running graph:

- ``restart``: a workload's pod template changes, so a new template hash rolls its pods;
- ``recreate``: an immutable field changes (a Deployment selector, a Service ``clusterIP``
  or ``type``, a RoleBinding ``roleRef``): the apply is refused unless forced, which deletes
  and recreates the object;
- ``delete``: a live object of the graph the render does not produce (a worker with another
  worker hash): pruning deletes it;
- ``handover`` (safe, in the documented order, docs/migration.md): an ``ownerReference`` to
  the operator's DynamoGraphDeployment or DynamoComponentDeployment (set by
  ``ctrl.SetControllerReference`` in ``SyncObservedResource``; its owner's deletion would
  garbage-collect the object), the operator's own DynamoComponentDeployments, fields owned
  by another field manager;
- ``change``: anything else the apply changes (labels, annotations, replicas);
- ``create``: a rendered object with no live counterpart.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from .. import context, keys
from ..context import Runner
from ..errors import Problem, RenderError, UsageError
from ..parse import parse
from ..read import read_path
from ..settings import RenderSettings
from .diff import ObjKey, object_key

Obj = dict[str, Any]
Effect = Literal["restart", "recreate", "delete", "handover", "change", "create"]
#: the effects that disrupt a running graph (``adopt --check`` exits 5 on any)
DISRUPTIVE: tuple[Effect, ...] = ("restart", "recreate", "delete")
EFFECTS: tuple[Effect, ...] = (*DISRUPTIVE, "handover", "change", "create")
#: the Dynamo operator's API group; its kinds own what it created
OPERATOR_GROUP = "nvidia.com"
DCD_KIND = "DynamoComponentDeployment"
#: the field manager of the operator's writes (a plain update: client-go's user agent, the
#: binary ``manager``; upstream ``deploy/operator/Dockerfile`` at 2a6da14c8)
OPERATOR_FIELD_MANAGER = "manager"
#: the field manager Argo CD applies with (Flux's: ``kustomize-controller``)
ARGOCD_FIELD_MANAGER = "argocd-controller"
#: where the pod template of each workload kind is ((group, kind) -> path)
TEMPLATES: dict[tuple[str, str], tuple[str, ...]] = {
    ("apps", "Deployment"): ("spec", "template"),
    ("apps", "StatefulSet"): ("spec", "template"),
    ("apps", "DaemonSet"): ("spec", "template"),
    ("apps", "ReplicaSet"): ("spec", "template"),
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): ("spec", "leaderWorkerTemplate"),
    ("grove.io", "PodCliqueSet"): ("spec", "template"),
    ("grove.io", "PodClique"): ("spec", "podSpec"),
}
#: fields the API server refuses to change ((group, kind) -> paths)
IMMUTABLE: dict[tuple[str, str], tuple[tuple[str, ...], ...]] = {
    ("apps", "Deployment"): (("spec", "selector"),),
    ("apps", "StatefulSet"): (
        ("spec", "selector"),
        ("spec", "serviceName"),
        ("spec", "volumeClaimTemplates"),
        ("spec", "podManagementPolicy"),
    ),
    ("apps", "DaemonSet"): (("spec", "selector"),),
    ("", "Service"): (("spec", "clusterIP"), ("spec", "type")),
    ("rbac.authorization.k8s.io", "RoleBinding"): (("roleRef",),),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): (("roleRef",),),
    ("batch", "Job"): (("spec", "template"), ("spec", "selector")),
}
#: fields whose values are quantities (a ResourceList's, an emptyDir's size)
QUANTITIES = frozenset({"limits", "requests", "sizeLimit"})
#: keys that identify the items of a list server-side apply merges item by item
MERGE_KEYS = ("name", "mountPath", "containerPort", "devicePath", "uid")
#: what the API server sets; never compared
SERVER_META = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "selfLink",
    "ownerReferences",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "finalizers",
)
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_QUANTITY = re.compile(r"([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)")
_SUFFIX: dict[str, Decimal | int] = {
    "": 1,
    "m": Decimal("0.001"),
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}
#: most field paths listed per object and effect
MAX_PATHS = 8


@dataclass(frozen=True)
class Finding:
    """What the apply does to one object: its ``effect``, the fields, why."""

    effect: Effect
    kind: str
    namespace: str
    name: str
    message: str
    paths: tuple[str, ...] = ()

    @property
    def obj(self) -> str:
        return f"{self.kind}/{self.name}"

    def __str__(self) -> str:
        where = f" ({', '.join(self.paths)})" if self.paths else ""
        return f"{self.effect:<9} {self.obj}: {self.message}{where}"


@dataclass
class Check:
    """The findings, in effect order, and the number of objects the apply leaves as they are."""

    findings: list[Finding] = field(default_factory=list)
    unchanged: int = 0

    @property
    def disruptive(self) -> bool:
        return any(f.effect in DISRUPTIVE for f in self.findings)

    def count(self, effect: Effect) -> int:
        return sum(1 for f in self.findings if f.effect == effect)


# ---------------------------------------------------------------------------- the apply
def _quantity(value: Any) -> Decimal | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return Decimal(str(value))
    m = _QUANTITY.fullmatch(value) if isinstance(value, str) else None
    if m is None or m.group(2) not in _SUFFIX:
        return None
    try:
        return Decimal(m.group(1)) * _SUFFIX[m.group(2)]
    except InvalidOperation:
        return None


def same(live: Any, rendered: Any) -> bool:
    """Two quantities equal as the API server stores them (``"1000m"`` is ``1``)."""
    if live == rendered:
        return True
    a, b = _quantity(live), _quantity(rendered)
    return a is not None and a == b


def _empty(value: Any) -> bool:
    return value is None or value == {} or value == []


def _merge_key(live: list[Any], rendered: list[Any]) -> str | None:
    items = [*live, *rendered]
    if not items or not all(isinstance(i, dict) for i in items):
        return None
    return next((k for k in MERGE_KEYS if all(k in i for i in items)), None)


def applied(live: Any, rendered: Any, quantity: bool = False) -> Any:
    """``live`` after a forced server-side apply of ``rendered`` (see the module docstring);
    ``quantity``: the values are quantities (the API server stores them canonical)."""
    if isinstance(rendered, dict) and isinstance(live, dict):
        out = dict(live)
        for k, v in rendered.items():
            if k in live or not _empty(v):
                out[k] = applied(live.get(k), v, quantity or k in QUANTITIES)
        return out
    if isinstance(rendered, list) and isinstance(live, list):
        key = _merge_key(live, rendered)
        if key is not None:
            by_key = {i[key]: i for i in rendered}
            out_list = [applied(i, by_key.pop(i[key])) if i[key] in by_key else i for i in live]
            return out_list + list(by_key.values())
        if len(live) == len(rendered) and all(
            equal(applied(a, b), a) for a, b in zip(live, rendered, strict=True)
        ):
            return live
        return rendered
    if live is not None and (same(live, rendered) if quantity else live == rendered):
        return live
    return rendered


def equal(a: Any, b: Any) -> bool:
    return not differences(a, b)


def differences(before: Any, after: Any, path: str = "") -> list[str]:
    """The field paths where ``after`` differs from ``before`` (keyed items by their key)."""
    if isinstance(before, dict) and isinstance(after, dict):
        return [
            d
            for k in sorted(set(before) | set(after), key=str)
            for d in differences(before.get(k), after.get(k), _join(path, str(k)))
        ]
    if isinstance(before, list) and isinstance(after, list):
        key = _merge_key(before, after)
        if key is not None:
            a, b = {i[key]: i for i in before}, {i[key]: i for i in after}
            if list(a) == list(b):
                return [d for n in a for d in differences(a[n], b[n], f"{path}[{n}]")]
        elif len(before) == len(after):
            pairs = zip(before, after, strict=True)
            return [d for i, (x, y) in enumerate(pairs) for d in differences(x, y, f"{path}[{i}]")]
        return [path or "."]
    if _empty(before) and _empty(after):
        return []
    return [] if before == after else [path or "."]


def _join(path: str, key: str) -> str:
    """``path.key``, or ``path["key"]`` for a key such as an annotation's (dots, slashes)."""
    if not _PLAIN_KEY.fullmatch(key):
        return f"{path}[{json.dumps(key)}]"
    return f"{path}.{key}" if path else key


def _at(obj: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def _content(obj: Obj) -> Obj:
    """What an apply compares: the object without status and server-set metadata."""
    out = {k: v for k, v in obj.items() if k != "status"}
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in SERVER_META}
    out["metadata"] = meta
    return out


# ---------------------------------------------------------------------------- the check
def _kind_of(k: ObjKey) -> tuple[str, str]:
    return k[0], k[1]


def _capped(paths: list[str]) -> tuple[str, ...]:
    more = len(paths) - MAX_PATHS
    return tuple(paths[:MAX_PATHS]) + ((f"and {more} more",) if more > 0 else ())


def _pair(
    k: ObjKey, live: Obj, rendered: Obj, applier: str, keys_: set[ObjKey]
) -> Iterator[Finding]:
    """What applying ``rendered`` does to ``live`` (the same object)."""
    before = _content(live)
    after = applied(before, _content(rendered))
    template = TEMPLATES.get(_kind_of(k))
    changed = differences(before, after)
    rolled = [p for p in changed if _rolls(p, template)]
    if rolled:
        yield Finding("restart", k[1], k[2], k[3], "the pod template changes", _capped(rolled))
    immutable = [
        ".".join(p)
        for p in IMMUTABLE.get(_kind_of(k), ())
        if _at(before, p) is not None and not equal(_at(before, p), _at(after, p))
    ]
    if immutable:
        yield Finding(
            "recreate", k[1], k[2], k[3], "an immutable field changes", _capped(immutable)
        )
    rest = [
        p
        for p in changed
        if not _rolls(p, template) and not any(p == i or p.startswith(i + ".") for i in immutable)
    ]
    if rest:
        yield Finding("change", k[1], k[2], k[3], "the apply changes", _capped(rest))
    yield from _ownership(k, live, applier, keys_)


def _rolls(path: str, template: tuple[str, ...] | None) -> bool:
    """Whether a change at ``path`` changes the pod template (a Grove clique's replicas in a
    PodCliqueSet's template scale it: no new pod template)."""
    if template is None or path.endswith(".replicas"):
        return False
    prefix = ".".join(template)
    return path == prefix or path.startswith((prefix + ".", prefix + "["))


def _ownership(k: ObjKey, live: Obj, applier: str, rendered: set[ObjKey]) -> Iterator[Finding]:
    """The operator's owner references to an object the render does not hold (a DCD: its
    deletion would garbage-collect ``live``; one to a rendered DGD stays harmless, as the
    companion controller's own), and the field managers of ``live`` but the applier's and
    the companion controller's."""
    meta = live.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if not isinstance(ref, dict):
            continue
        group = str(ref.get("apiVersion", "")).rpartition("/")[0]
        owner = (group, str(ref.get("kind")), k[2], str(ref.get("name")))
        if group == OPERATOR_GROUP and owner not in rendered:
            message = (
                f"ownerReference to {owner[1]}/{owner[3]}, which the render does not hold: "
                "remove it before the owner is deleted, or the garbage collector deletes "
                "this object"
            )
            yield Finding("handover", k[1], k[2], k[3], message)
    managers = sorted(
        {
            str(e.get("manager"))
            for e in meta.get("managedFields") or []
            if isinstance(e, dict) and e.get("manager") and e.get("subresource") != "status"
        }
        - {applier, keys.CONTROLLER_FIELD_MANAGER}
    )
    if managers:
        message = (
            f"fields managed by {', '.join(managers)}: a server-side apply with "
            f"--force-conflicts moves those the render sets to {applier}"
        )
        yield Finding("handover", k[1], k[2], k[3], message)


def _graph_names(rendered: list[Obj]) -> set[str]:
    """The name of every graph the render holds (its DGDs, its objects' graph label)."""
    out = set()
    for o in rendered:
        meta = o.get("metadata") or {}
        name = (meta.get("labels") or {}).get(keys.LABEL_GRAPH_NAME)
        if o.get("kind") == "DynamoGraphDeployment":
            name = meta.get("name")
        if name:
            out.add(str(name))
    return out


def _owned_by_graph(ref: Any, graphs: set[str]) -> bool:
    """An owner reference to an operator object of one of ``graphs`` (a DGD, or a DCD, which
    the operator names ``<graph>-<component>``)."""
    if not isinstance(ref, dict) or not str(ref.get("apiVersion", "")).startswith(
        OPERATOR_GROUP + "/"
    ):
        return False
    name = str(ref.get("name", ""))
    return any(name == g or name.startswith(g + "-") for g in graphs)


def _of_graph(live: Obj, graphs: set[str]) -> bool:
    """Whether ``live`` belongs to one of ``graphs``: by its label, or owned by one."""
    meta = live.get("metadata") or {}
    if (meta.get("labels") or {}).get(keys.LABEL_GRAPH_NAME) in graphs:
        return True
    return any(_owned_by_graph(r, graphs) for r in meta.get("ownerReferences") or [])


def _keyed(objs: list[Obj], namespace: str) -> dict[ObjKey, Obj]:
    """Objects by key; ``namespace`` for one that names none (cluster-scoped kinds have no
    namespace on either side, see :func:`_find`)."""
    out = {}
    for o in objs:
        g, kind, ns, name = object_key(o)
        out[(g, kind, ns or namespace, name)] = o
    return out


def _find(live: dict[ObjKey, Obj], k: ObjKey) -> ObjKey | None:
    if k in live:
        return k
    bare = (k[0], k[1], "", k[3])  # a cluster-scoped object: no namespace live
    return bare if bare in live else None


def _left_over(k: ObjKey, obj: Obj, replaced_by: dict[tuple[str, ...], ObjKey]) -> Finding:
    """A live object of the graph the render does not produce."""
    if k[:2] == (OPERATOR_GROUP, DCD_KIND):
        message = (
            "the operator's own object: delete it once the owner references to it are "
            "removed and the operator is stopped"
        )
        return Finding("handover", k[1], k[2], k[3], message)
    labels = (obj.get("metadata") or {}).get("labels") or {}
    new = replaced_by.get(_generation(k, labels))
    message = "not in the render: pruning deletes it"
    if new is not None:
        message = (
            f"not in the render, which has {new[1]}/{new[3]} instead (another worker hash: "
            "compare the live DGD's annotations, such as "
            f"{keys.ANN_OPERATOR_ORIGIN_VERSION}, with the render's settings)"
        )
    return Finding("delete", k[1], k[2], k[3], message)


def _generation(k: ObjKey, labels: Any) -> tuple[str, ...]:
    """A worker's kind, graph and component, whatever its worker hash."""
    if not isinstance(labels, dict) or keys.LABEL_WORKER_HASH not in labels:
        return ()
    graph, component = labels.get(keys.LABEL_GRAPH_NAME), labels.get(keys.LABEL_COMPONENT)
    return (*k[:3], str(graph), str(component))


def check(
    rendered: list[Obj],
    live: list[Obj],
    namespace: str = "default",
    applier: str = ARGOCD_FIELD_MANAGER,
) -> Check:
    """Compare the live objects with the render: what a forced server-side apply of the
    render (and pruning what it leaves out of the graph) does to each. ``namespace``: that of
    an object that names none; ``applier``: the GitOps tool's field manager."""
    ours, theirs = _keyed(rendered, namespace), _keyed(live, namespace)
    graphs = _graph_names(rendered)
    out = Check()
    matched: set[ObjKey] = set()
    rendered_keys = set(ours)
    created: dict[tuple[str, ...], ObjKey] = {}
    for k, obj in ours.items():
        found = _find(theirs, k)
        if found is None:
            out.findings.append(
                Finding("create", k[1], k[2], k[3], "not live: the apply creates it")
            )
            labels = (obj.get("metadata") or {}).get("labels")
            if gen := _generation(k, labels):
                created[gen] = k
            continue
        matched.add(found)
        findings = list(_pair(found, theirs[found], obj, applier, rendered_keys))
        out.findings += findings
        out.unchanged += not findings
    for k, obj in theirs.items():
        if k not in matched and _of_graph(obj, graphs):
            out.findings.append(_left_over(k, obj, created))
    rank = {e: i for i, e in enumerate(EFFECTS)}
    out.findings.sort(key=lambda f: (rank[f.effect], f.kind, f.namespace, f.name, f.message))
    return out


# ---------------------------------------------------------------------------- the inputs
def live_objects(path: str, settings: RenderSettings) -> list[Obj]:
    """The objects of ``path`` (a file or ``-``: YAML or JSON, one document per object or
    ``kubectl get -o yaml``'s ``List``), read within the render limits; raises
    :class:`RenderError` with every problem (file:line)."""
    try:
        src = read_path(path, max_file_bytes=settings.max_file_bytes)
    except (FileNotFoundError, NotADirectoryError, PermissionError) as exc:
        raise UsageError(f"--live: {exc}") from None
    if src.root != "-" and not src.given_file:
        raise UsageError(f"--live: {path} is a directory; give a file (kubectl get -o yaml)")
    problems = [replace(p, file=path) for p in src.problems]
    docs = parse(src, settings, problems)  # the render's own parse stage and limits
    problems = [replace(p, file=path) for p in problems]
    out: list[Obj] = []
    for doc in docs:
        items = doc.data.get("items") if isinstance(doc.data, dict) else None
        is_list = isinstance(doc.data, dict) and str(doc.data.get("kind", "")).endswith("List")
        for i, obj in enumerate(items if is_list and isinstance(items, list) else [doc.data]):
            where = ("items", i) if is_list else ()
            if _identified(obj):
                out.append(obj)
            else:
                message = "not a Kubernetes object (apiVersion, kind, metadata.name)"
                problems.append(Problem(path, doc.line, path=where, message=message))
    if problems:
        raise RenderError(problems)
    return out


def _identified(obj: Any) -> bool:
    if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
        return False
    fields = (obj.get("apiVersion"), obj.get("kind"), obj["metadata"].get("name"))
    return all(isinstance(v, str) and v for v in fields)


def run(
    path: str, rev: str | None, live: str, *, runner: Runner, applier: str = ARGOCD_FIELD_MANAGER
) -> Check:
    """Render ``path`` (at ``rev``) and check it against the live objects of the file ``live``."""
    if live == "-" and path == "-":
        raise UsageError("--live - and PATH - cannot both read stdin")
    ctx = context.open_path(path, rev, runner=runner)
    rendered = context.render(ctx).objects
    objs = live_objects(live, ctx.settings)
    return check(rendered, objs, _namespace(ctx.settings.namespace, objs), applier)


def _namespace(setting: str, live: list[Obj]) -> str:
    """The namespace of a rendered object that names none: the setting's, else the live
    objects' one namespace (kubectl applies to the current namespace), else ``default``."""
    if setting:
        return setting
    found = {str((o.get("metadata") or {}).get("namespace") or "") for o in live} - {""}
    return found.pop() if len(found) == 1 else "default"
