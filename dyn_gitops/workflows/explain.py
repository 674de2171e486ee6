"""``explain``: where each env var, port, probe and volume of a rendered pod comes from.

The pod is rendered as ``render`` renders it; each item is then traced back: to the field of
the DynamoGraphDeployment that wrote it (``file:line field.path``, looked for in the
service's own subtree, and for env vars the graph's ``spec.envs``, for volumes its
``spec.pvcs``), else to the setting that injects it, else it is one of the operator's
defaults for the service's component type, which dyn-gitops renders as the operator does
(``dyn_gitops/expand/defaults.py``; docs/reference-behaviour.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .. import context, keys
from ..errors import Problem, UsageError
from ..parse import Document, locate, parse
from ..settings import REGISTRY, RenderSettings

Path = tuple[str | int, ...]
GRAPH_KINDS = ("DynamoGraphDeployment", "DynamoComponentDeployment")
PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
#: "NATS_SERVER injected ..." in a setting's help: the env var that setting injects
_INJECTS = re.compile(r"^([A-Z][A-Z0-9_]+) injected")


@dataclass(frozen=True)
class Row:
    workload: str  # Kind/name of the rendered object
    container: str  # "" for a pod-level item (a volume)
    what: str  # env, envFrom, port, probe, volumeMount, volume
    name: str
    origin: str


@dataclass(frozen=True)
class Explained:
    graph: str
    service: str
    component_type: str
    rows: list[Row]


def explain(ctx: context.RenderContext, graph: str, service: str) -> Explained:
    """Render ``ctx`` and trace the pods of ``service`` of ``graph`` (raises
    :class:`UsageError` when there is no such graph or service, RenderError on bad input)."""
    result = context.render(ctx)
    problems: list[Problem] = []
    docs = [
        d
        for d in parse(ctx.source, ctx.settings, problems)
        if isinstance(d.data, dict)
        and d.data.get("kind") in GRAPH_KINDS
        and str(d.data.get("apiVersion", "")).startswith("nvidia.com/")
    ]
    named = [d for d in docs if (d.data.get("metadata") or {}).get("name") == graph]
    if not named:
        found = sorted({str((d.data.get("metadata") or {}).get("name")) for d in docs})
        raise UsageError(
            f"explain: no DynamoGraphDeployment named {graph!r} in {ctx.source.root} "
            f"(found: {', '.join(found) or 'none'})"
        )
    doc = named[0]
    subtree, services = _service_subtree(doc.data, service)
    if subtree is None:
        raise UsageError(
            f"explain: {graph} has no service {service!r} (services: {', '.join(services)})"
        )
    svc = _at(doc.data, subtree)
    ctype = str(svc.get("componentType") or svc.get("type") or "") if isinstance(svc, dict) else ""
    tracer = _Tracer(doc, subtree, ctx.settings, ctype)
    rows: list[Row] = []
    for obj in result.objects:
        for labels, pod in _pod_specs(obj, {}):
            if labels.get(keys.LABEL_COMPONENT) != service:
                continue
            if labels.get(keys.LABEL_GRAPH_NAME, graph) != graph:
                continue
            rows.extend(tracer.pod(f"{obj.get('kind')}/{obj['metadata'].get('name')}", pod))
    if not rows:
        raise UsageError(f"explain: {graph}/{service} renders no pod (nothing to explain)")
    return Explained(graph, service, ctype, rows)


def _service_subtree(data: dict[str, Any], service: str) -> tuple[Path | None, list[str]]:
    raw = data.get("spec")
    spec: dict[str, Any] = raw if isinstance(raw, dict) else {}
    if data.get("kind") == "DynamoComponentDeployment":
        return ("spec",), [str(spec.get("serviceName") or spec.get("componentName") or "")]
    services = spec.get("services")
    if isinstance(services, dict):
        return (("spec", "services", service) if service in services else None), sorted(services)
    components = spec.get("components")
    if isinstance(components, list):
        names = [str(c.get("name")) for c in components if isinstance(c, dict)]
        for i, c in enumerate(components):
            if isinstance(c, dict) and c.get("name") == service:
                return ("spec", "components", i), names
        return None, names
    return None, []


def _at(data: Any, path: Path) -> Any:
    for step in path:
        data = data[step]
    return data


def _pod_specs(node: Any, labels: dict[str, str]) -> Iterator[tuple[dict[str, str], Any]]:
    """Every PodSpec below ``node`` (a dict with ``containers``), with the labels of the
    nearest enclosing metadata (a pod template's, a clique's, the object's)."""
    if isinstance(node, dict):
        meta = node.get("metadata")
        if isinstance(meta, dict) and isinstance(meta.get("labels"), dict):
            labels = {**labels, **meta["labels"]}
        if isinstance(node.get("containers"), list):
            yield labels, node
            return
        for value in node.values():
            yield from _pod_specs(value, labels)
    elif isinstance(node, list):
        for value in node:
            yield from _pod_specs(value, labels)


def _walk(node: Any, path: Path) -> Iterator[tuple[Path, Any]]:
    yield path, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _walk(v, (*path, str(k)))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk(v, (*path, i))


def _env_value(env: dict[str, Any]) -> Any:
    return (env.get("value"), env.get("valueFrom"))


def _list_key(path: Path) -> str:
    """The key of the list an item sits in (``env`` for ``...env[3]``)."""
    return str(path[-2]) if len(path) >= 2 and isinstance(path[-1], int) else ""


class _Tracer:
    def __init__(self, doc: Document, subtree: Path, settings: RenderSettings, ctype: str):
        self.doc, self.settings = doc, settings
        self.default = f"operator default ({ctype or 'component'})"
        service = list(_walk(_at(doc.data, subtree), subtree))
        raw = doc.data.get("spec")
        spec: dict[str, Any] = raw if isinstance(raw, dict) else {}
        graph_envs = [  # v1alpha1 spec.envs, v1beta1 spec.env
            item
            for key in ("envs", "env")
            if key in spec
            for item in _walk(spec[key], ("spec", key))
        ]
        pvcs = list(_walk(spec.get("pvcs"), ("spec", "pvcs"))) if "pvcs" in spec else []
        self.service, self.graph_envs, self.pvcs = service, graph_envs, pvcs
        self.injected: dict[str, tuple[str, Any]] = {}
        for s in REGISTRY:
            m = _INJECTS.match(s.help)
            if m:
                self.injected[m.group(1)] = (s.name, getattr(settings, s.attr))

    def _where(self, path: Path) -> str:
        line = locate(self.doc, path)
        dotted = ".".join(f"[{p}]" if isinstance(p, int) else p for p in path).replace(".[", "[")
        return f"{self.doc.file.path}:{line} {dotted}"

    def _find(self, nodes: Sequence[tuple[Path, Any]], lists: tuple[str, ...], match: Any) -> str:
        for path, node in nodes:
            if isinstance(node, dict) and _list_key(path) in lists and match(node):
                return self._where(path)
        return ""

    def pod(self, workload: str, pod: dict[str, Any]) -> list[Row]:
        rows: list[Row] = []
        containers = [
            *((c, "init") for c in pod.get("initContainers") or []),
            *((c, "") for c in pod.get("containers") or []),
        ]
        for c, kind in containers:
            if not isinstance(c, dict):
                continue
            cname = str(c.get("name", "")) + (" (init)" if kind else "")
            for env in c.get("env") or []:
                rows.append(Row(workload, cname, "env", str(env.get("name")), self.env(env)))
            for src in c.get("envFrom") or []:
                ref = src.get("secretRef") or src.get("configMapRef") or {}
                what = "secret" if "secretRef" in src else "configMap"
                rows.append(
                    Row(workload, cname, "envFrom", f"{what} {ref.get('name')}", self.ref(ref))
                )
            for port in c.get("ports") or []:
                label = f"{port.get('name', '')}:{port.get('containerPort')}".lstrip(":")
                rows.append(Row(workload, cname, "port", label, self.port(port)))
            for probe in PROBES:
                if probe in c:
                    rows.append(Row(workload, cname, "probe", probe, self.probe(probe)))
            for m in c.get("volumeMounts") or []:
                label = f"{m.get('name')}:{m.get('mountPath')}"
                rows.append(Row(workload, cname, "volumeMount", label, self.mount(m)))
        for v in pod.get("volumes") or []:
            rows.append(Row(workload, "", "volume", str(v.get("name")), self.volume(v)))
        return rows

    def env(self, env: dict[str, Any]) -> str:
        """The source whose value the rendered env var has; of several, the one that wins
        (the main container's env over the service's envs over the graph's spec.envs, as
        the operator merges them)."""
        name = env.get("name")
        found: list[tuple[int, Path, Any]] = []
        for nodes, lists in ((self.service, ("env", "envs")), (self.graph_envs, ("envs", "env"))):
            for path, node in nodes:
                if isinstance(node, dict) and _list_key(path) in lists and node.get("name") == name:
                    graph_level = path[:2] in (("spec", "envs"), ("spec", "env"))
                    rank = 0 if graph_level else 1 if path[-2] == "envs" else 2
                    found.append((rank, path, node))
        if found:
            same = [f for f in found if _env_value(f[2]) == _env_value(env)]
            rank, path, _node = max(same or found, key=lambda f: f[0])
            return self._where(path)
        if name in self.injected:
            setting, value = self.injected[name]
            if value not in ("", None) and env.get("value") == str(value):
                return f"setting {setting}"
        return self.default

    def ref(self, ref: dict[str, Any]) -> str:
        name = ref.get("name")
        for path, node in self.service:
            if node == name and path and path[-1] in ("envFromSecret", "name"):
                return self._where(path)
        return self.default

    def port(self, port: dict[str, Any]) -> str:
        want = port.get("containerPort")
        return (
            self._find(self.service, ("ports",), lambda n: n.get("containerPort") == want)
            or self.default
        )

    def probe(self, probe: str) -> str:
        for path, _node in self.service:
            if path and path[-1] == probe:
                return self._where(path)
        return self.default

    def mount(self, m: dict[str, Any]) -> str:
        name, at = m.get("name"), m.get("mountPath")
        return (
            self._find(
                self.service,
                ("volumeMounts",),
                lambda n: n.get("name") == name or at in (n.get("mountPath"), n.get("mountPoint")),
            )
            or self.default
        )

    def volume(self, v: dict[str, Any]) -> str:
        name = v.get("name")
        claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
        return (
            self._find(self.service, ("volumes",), lambda n: n.get("name") == name)
            or self._find(self.pvcs, ("pvcs",), lambda n: n.get("name") in (name, claim))
            or self._find(self.service, ("volumeMounts",), lambda n: n.get("name") in (name, claim))
            or self.default
        )


def table(e: Explained) -> str:
    """The rows as an aligned text table, grouped by workload."""
    out: list[str] = [
        f"# {e.graph}/{e.service} ({e.component_type or 'component'}): where each item of "
        "the rendered pod comes from.",
        "# file:line field.path: written in the DGD; setting NAME: injected by that render "
        "setting;",
        "# operator default (TYPE): what the Dynamo operator adds for that component type, "
        "rendered as it does",
        "# (dyn_gitops/expand/defaults.py, docs/reference-behaviour.md).",
    ]
    workloads = list(dict.fromkeys(r.workload for r in e.rows))
    w_what = max(len(r.what) for r in e.rows)
    w_name = max(len(r.name) for r in e.rows)
    w_cont = max(len("CONTAINER"), *(len(r.container or "(pod)") for r in e.rows))
    for wl in workloads:
        out.append("")
        out.append(wl)
        out.append(f"  {'CONTAINER':<{w_cont}}  {'ITEM':<{w_what}}  {'NAME':<{w_name}}  FROM")
        for r in e.rows:
            if r.workload == wl:
                out.append(
                    f"  {r.container or '(pod)':<{w_cont}}  {r.what:<{w_what}}  "
                    f"{r.name:<{w_name}}  {r.origin}"
                )
    return "\n".join(out) + "\n"


__all__ = ["Explained", "Row", "explain", "table"]
