"""Faults injected with real processes: a realistic cluster whose etcd and kube-apiserver a
test kills, restarts or stalls; the companion controller as real processes (leader
election on, each with its own /metrics port and log); watches that survive the outages.

* :class:`Faults`: ``restart_apiserver`` (SIGKILL, then the same binary, flags, port and
  certificates), ``restart_etcd`` (SIGKILL, an outage, then the same data directory),
  ``stall_apiserver`` (SIGSTOP for a while, then SIGCONT).
* :class:`Controller`: ``python -m dyn_gitops_operator`` with the cluster's kubeconfig, in
  namespace mode on the test's namespace, with its own lease name; ``POD_NAME`` is set per
  process (its default identity is derived from it, as in a pod); a process that exits on
  its own (a lost leadership) is started again, as the kubelet restarts a container.
* :class:`Watcher`: one list + watch of a kind that never dies silently. When the watch
  breaks (the API server is gone, stalled, or restarted) it resumes from its last
  resourceVersion; when that has expired (410 Gone: a restarted kube-apiserver's watch
  cache starts at the current revision) it re-lists, and what happened in between is
  unknown: :class:`ReadyPods` then counts, for the gap, only the pods that were serving
  before it and whose stored object is *unchanged* after it (same uid and resourceVersion:
  nothing about them, their readiness included, was written meanwhile). Any pod that
  changed, appeared or vanished during the gap counts as not serving, so the floor check
  can only be stricter than the truth. A watch that fails for good fails :meth:`check`.
* :class:`Ledger`: every Deployment and ReplicaSet uid seen per name: a generation created
  twice (one name, two uids) or a Deployment with two ReplicaSets (its template rewritten)
  shows there.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from support.controlplane import REPO, ControlPlane, _stop, _wait, free_port

#: seconds an etcd outage lasts (:meth:`Faults.restart_etcd`) and a stall
ETCD_OUTAGE = 12.0
STALL = 20.0
#: kube-controller-manager flags of the fault cluster: KWOK's node leases (40 s) are not
#: renewed while kube-apiserver is down or stopped; the node lifecycle controller's default
#: 40-50 s grace would mark the fake nodes NotReady (and their pods not Ready) when an
#: outage plus a loaded machine exceed it: a kubelet effect, not the controller's
KCM_FLAGS = ("--node-monitor-grace-period=120s",)


class Faults:
    """Disrupts the control plane's processes; each call returns once kube-apiserver is
    ready again (``/readyz``: etcd reachable, CRDs served)."""

    def __init__(self, plane: ControlPlane) -> None:
        self.cp = plane

    def _respawn(self, old: subprocess.Popen[bytes]) -> subprocess.Popen[bytes]:
        """The same command line again (the control plane stops only the processes it
        started, already dead: :meth:`close` stops the replacements)."""
        with open(self.cp.log, "ab") as logf:
            return subprocess.Popen(
                list(old.args),  # type: ignore[arg-type]
                stdout=logf,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def close(self) -> None:
        """Stop the current kube-apiserver, then etcd (whether restarted or not)."""
        for p in (self.cp.apiserver, self.cp.etcd):
            _stop(p)

    def _kill(self, p: subprocess.Popen[bytes]) -> None:
        p.kill()
        p.wait(30)

    def _wait_ready(self, timeout: float = 180) -> None:
        _wait(
            f"{self.cp.url}/readyz",
            lambda s, b: s == 200,
            timeout,
            [self.cp.etcd, self.cp.apiserver],
            self.cp.log,
            ctx=ssl._create_unverified_context(),  # loopback readiness probe only
            headers={"Authorization": f"Bearer {self.cp.token}"},
        )

    def restart_apiserver(self, down: float = 2.0) -> None:
        self._kill(self.cp.apiserver)
        time.sleep(down)
        self.cp.apiserver = self._respawn(self.cp.apiserver)
        self._wait_ready()

    def restart_etcd(self, down: float = ETCD_OUTAGE) -> None:
        self._kill(self.cp.etcd)
        time.sleep(down)
        self.cp.etcd = self._respawn(self.cp.etcd)
        self._wait_ready()

    def stall_apiserver(self, seconds: float = STALL) -> None:
        self.cp.apiserver.send_signal(signal.SIGSTOP)
        try:
            time.sleep(seconds)
        finally:
            self.cp.apiserver.send_signal(signal.SIGCONT)
        self._wait_ready()

    @contextlib.contextmanager
    def apiserver_down(self) -> Iterator[None]:
        """kube-apiserver killed for the block, then started again (same port and certs)."""
        self._kill(self.cp.apiserver)
        try:
            yield
        finally:
            self.cp.apiserver = self._respawn(self.cp.apiserver)
            self._wait_ready()


# ---------------------------------------------------------------------------- controllers
#: seconds before a controller process that exited on its own is started again
RESTART_DELAY = 1.0


@dataclass
class Controller:
    """One controller process, supervised as a pod's container (``restartPolicy:
    Always``): when it exits on its own (exit code 1 after losing its leadership) it is
    started again after :data:`RESTART_DELAY` (``restarts`` counts them). ``kill()`` is the
    pod lost (a node failure: nothing restarts it); ``start()`` after it is the pod back
    (same ``POD_NAME``, same lease). Each run logs to a new file."""

    kubeconfig: Path
    namespace: str
    pod: str
    lease: str
    logdir: Path
    proc: subprocess.Popen[bytes] | None = None
    port: int = 0
    logs: list[Path] = field(default_factory=list)
    restarts: int = 0
    _wanted: bool = False

    def start(self) -> Controller:
        self._wanted = True
        self._spawn()
        return self

    def _supervise(self, proc: subprocess.Popen[bytes]) -> None:
        proc.wait()
        time.sleep(RESTART_DELAY)
        if self._wanted and self.proc is proc:
            self.restarts += 1
            self._spawn()

    def _spawn(self) -> None:
        self.port = free_port()
        log = self.logdir / f"{self.pod}-{len(self.logs)}.log"
        self.logs.append(log)
        env = {
            **os.environ,
            "POD_NAME": self.pod,
            "PYTHONPATH": os.pathsep.join(
                [str(REPO), str(REPO / "operator"), os.environ.get("PYTHONPATH", "")]
            ),
        }
        env.pop("DYN_GITOPS_OPERATOR_IDENTITY", None)
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "dyn_gitops_operator",
                    f"--kubeconfig={self.kubeconfig}",
                    "--mode=namespace",
                    f"--namespace={self.namespace}",
                    "--no-scope-lease",
                    "--no-dynamo-models",
                    f"--leader-election-id={self.lease}",
                    f"--http-address=127.0.0.1:{self.port}",
                    "--log-format=json",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        threading.Thread(target=self._supervise, args=(self.proc,), daemon=True).start()

    def kill(self) -> None:
        """SIGKILL: no lease handed over, nothing flushed, not restarted."""
        self._wanted = False
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def stop(self) -> None:
        self._wanted = False
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def records(self) -> list[dict[str, Any]]:
        """The JSON log lines of every run, in order; ``ts`` (RFC 3339 in the line) as
        seconds since the epoch, to compare with ``time.time()``."""
        out = []
        for log in self.logs:
            for line in log.read_text(errors="replace").splitlines():
                with contextlib.suppress(ValueError):
                    rec = json.loads(line)
                    if isinstance(rec, dict):
                        if isinstance(rec.get("ts"), str):
                            rec["ts"] = datetime.fromisoformat(rec["ts"]).timestamp()
                        out.append(rec)
        return out

    def text(self) -> str:
        return "\n".join(
            f"--- {p.name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-30:])
            for p in self.logs
        )

    def metrics(self) -> dict[str, float]:
        """``{'name{labels}': value}`` from /metrics (empty if it does not answer)."""
        try:
            url = f"http://127.0.0.1:{self.port}/metrics"
            with urllib.request.urlopen(url, timeout=10) as r:
                body = r.read().decode()
        except OSError:
            return {}
        out = {}
        for line in body.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                with contextlib.suppress(ValueError):
                    out[name] = float(value)
        return out

    def leading(self) -> bool:
        return self.metrics().get("dyn_gitops_controller_leader") == 1.0

    def writes(self) -> float:
        """Writes to workloads and graphs (leases are not counted by the metric)."""
        return sum(
            v
            for k, v in self.metrics().items()
            if k.startswith("dyn_gitops_controller_writes_total{")
        )


@contextlib.contextmanager
def controllers(
    kubeconfig: Path, namespace: str, logdir: Path, pods: tuple[str, ...] = ("ctl-0",)
) -> Iterator[list[Controller]]:
    """Start one controller process per pod name (sharing one lease); all stopped at exit.
    The first is started first and waited for as leader before the others start."""
    lease = f"dyn-gitops-faults-{namespace}"
    procs = [Controller(kubeconfig, namespace, pod, lease, logdir) for pod in pods]
    try:
        for i, c in enumerate(procs):
            c.start()
            if i == 0:
                until(c.leading, 120, "the first controller process leading", c.text)
        yield procs
    finally:
        for c in procs:
            c.stop()


def until(
    cond: Callable[[], Any],
    timeout: float,
    what: str,
    diagnose: Callable[[], str] | None = None,
    interval: float = 0.3,
) -> Any:
    """Poll ``cond()`` until truthy, tolerating any exception (an API server being down or
    stalled makes calls fail or time out); a timeout names the last one."""
    end = time.monotonic() + timeout
    last: BaseException | None = None
    while time.monotonic() < end:
        try:
            value = cond()
            if value:
                return value
        except Exception as exc:
            last = exc
        time.sleep(interval)
    tail = f" (last error: {type(last).__name__}: {last})" if last else ""
    more = f"\n{diagnose()}" if diagnose else ""
    raise AssertionError(f"timed out after {timeout} s waiting for {what}{tail}{more}")


# ---------------------------------------------------------------------------- watches
def quiet(api: Any) -> Any:
    """A client like ``api`` whose calls fail at once when the server is down (no urllib3
    retries, each logged as a warning): the watcher retries itself."""
    import copy

    from kubernetes import client

    cfg = copy.copy(api.configuration)
    cfg.retries = 0
    return client.ApiClient(cfg)


Item = tuple[str, str, Any]  # (uid, resourceVersion, the object)


class Watcher:
    """List + watch one kind in one namespace on a thread; survives outages (see the
    module's docstring). Subclasses handle events and gaps."""

    def __init__(self, list_fn: Callable[..., Any], namespace: str, selector: str = "") -> None:
        self.list_fn, self.namespace, self.selector = list_fn, namespace, selector
        self.lock = threading.Lock()
        self.items: dict[str, Item] = {}
        self.gaps = 0
        self.resumes = 0
        #: the resourceVersion the watch resumes from
        self.rv = ""
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ---- the subclasses' part
    def on_event(self, kind: str, name: str, obj: Any) -> None: ...

    def on_gap(self, before: dict[str, Item], after: dict[str, Item]) -> None: ...

    def on_listed(self) -> None: ...

    # ---- the machinery
    def _list(self) -> tuple[dict[str, Item], str]:
        listing = self.list_fn(self.namespace, label_selector=self.selector, _request_timeout=30)
        items = {
            o.metadata.name: (o.metadata.uid, o.metadata.resource_version, o) for o in listing.items
        }
        return items, listing.metadata.resource_version

    def __enter__(self) -> Watcher:
        items, rv = self._list()
        with self.lock:
            self.items = items
            for name, (_, _, obj) in items.items():
                self.on_event("LIST", name, obj)
            self.on_listed()
        self._thread = threading.Thread(target=self._guarded, args=(rv,), daemon=True)
        self._thread.start()
        return self

    def _guarded(self, rv: str) -> None:
        try:
            self._run(rv)
        except BaseException as exc:  # reported by check(): a dead watch fails the test
            self.error = exc

    def _run(self, rv: str) -> None:
        from kubernetes.client.exceptions import ApiException

        self.rv = rv
        while not self._stop.is_set():
            try:
                self._stream()
            except ApiException as exc:
                if exc.status != 410:
                    self._pause()
                    continue
                self._relist()  # expired: what happened meanwhile is unknown
            except Exception:
                self._pause()  # down or stalled: resume from self.rv when it answers again

    def _pause(self) -> None:
        self.resumes += 1
        self._stop.wait(0.5)

    def _stream(self) -> None:
        """Watch from ``self.rv``, which follows every event handled (a broken stream
        resumes after the last one, never replays it)."""
        from kubernetes import watch

        w = watch.Watch()
        for ev in w.stream(
            self.list_fn,
            self.namespace,
            label_selector=self.selector,
            resource_version=self.rv,
            timeout_seconds=10,
            allow_watch_bookmarks=True,
            _request_timeout=(5, 40),
        ):
            obj = ev["object"]
            rv = obj.metadata.resource_version
            if ev["type"] != "BOOKMARK":
                name = obj.metadata.name
                with self.lock:
                    if ev["type"] == "DELETED":
                        self.items.pop(name, None)
                    else:
                        self.items[name] = (obj.metadata.uid, rv, obj)
                    self.on_event(ev["type"], name, obj)
            self.rv = rv
            if self._stop.is_set():
                w.stop()

    def _relist(self) -> None:
        while True:
            try:
                items, rv = self._list()
                break
            except Exception:
                if self._stop.wait(0.5):
                    return
        with self.lock:
            before, self.items = self.items, items
            self.gaps += 1
            self.on_gap(before, items)
        self.rv = rv

    def check(self) -> None:
        """Fail if the watch thread died."""
        if self.error is not None:
            raise AssertionError(f"the {self.list_fn.__name__} watch died: {self.error!r}")
        assert self._thread is not None and self._thread.is_alive(), "the watch is not running"

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(45)


def serving(pod: Any) -> bool:
    """Ready and not terminating (routable)."""
    if pod.metadata.deletion_timestamp:
        return False
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


class ReadyPods(Watcher):
    """The serving pods of a selector after every event, gaps counted conservatively."""

    def __init__(self, api: Any, namespace: str, selector: str) -> None:
        from kubernetes import client

        super().__init__(client.CoreV1Api(quiet(api)).list_namespaced_pod, namespace, selector)
        self._serving: dict[str, bool] = {}
        #: (event, pod name, serving pods after it)
        self.history: list[tuple[str, str, int]] = []

    def on_event(self, kind: str, name: str, obj: Any) -> None:
        if kind == "DELETED":
            self._serving.pop(name, None)
        else:
            self._serving[name] = serving(obj)
        if kind != "LIST":
            self.history.append((kind, name, self.count()))

    def on_listed(self) -> None:
        self.history.append(("LIST", "", self.count()))

    def on_gap(self, before: dict[str, Item], after: dict[str, Item]) -> None:
        unchanged = [
            n
            for n, (uid, rv, obj) in after.items()
            if before.get(n, ("", "", None))[:2] == (uid, rv) and serving(obj)
        ]
        self.history.append(("GAP", ",".join(sorted(unchanged)), len(unchanged)))
        self._serving = {n: serving(obj) for n, (_, _, obj) in after.items()}
        self.history.append(("RELIST", "", self.count()))

    def count(self) -> int:
        return sum(self._serving.values())

    def fewest(self) -> int:
        with self.lock:
            return min(n for _, _, n in self.history)

    def low_points(self, floor: int) -> list[tuple[str, str, int]]:
        with self.lock:
            return [h for h in self.history if h[2] < floor]


class Ledger:
    """Every Deployment and ReplicaSet (uid) seen in a namespace, by name."""

    def __init__(self, api: Any, namespace: str) -> None:
        from kubernetes import client

        apps = client.AppsV1Api(quiet(api))
        self.deployments = _Seen(apps.list_namespaced_deployment, namespace)
        self.replicasets = _Seen(apps.list_namespaced_replica_set, namespace)

    def __enter__(self) -> Ledger:
        self.deployments.__enter__()
        self.replicasets.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.replicasets.__exit__()
        self.deployments.__exit__()

    def check(self) -> None:
        self.deployments.check()
        self.replicasets.check()

    def duplicates(self, prefix: str) -> dict[str, set[str]]:
        """Deployment names (starting with ``prefix``) created more than once."""
        with self.deployments.lock:
            return {
                n: u
                for n, u in self.deployments.uids.items()
                if n.startswith(prefix) and len(u) > 1
            }

    def replicasets_per_deployment(self) -> dict[str, set[str]]:
        """{Deployment uid: uids of the ReplicaSets it controlled}."""
        out: dict[str, set[str]] = {}
        with self.replicasets.lock:
            for rs_uid, owners in self.replicasets.owners.items():
                for owner in owners:
                    out.setdefault(owner, set()).add(rs_uid)
        return out


class _Seen(Watcher):
    def __init__(self, list_fn: Callable[..., Any], namespace: str) -> None:
        super().__init__(list_fn, namespace)
        self.uids: dict[str, set[str]] = {}
        #: {uid: uids of its controller owner references}
        self.owners: dict[str, set[str]] = {}

    def on_event(self, kind: str, name: str, obj: Any) -> None:
        uid = obj.metadata.uid
        self.uids.setdefault(name, set()).add(uid)
        refs = obj.metadata.owner_references or []
        self.owners.setdefault(uid, set()).update(r.uid for r in refs if r.controller)

    def on_gap(self, before: dict[str, Item], after: dict[str, Item]) -> None:
        for name, (_, _, obj) in after.items():
            self.on_event("RELIST", name, obj)
