"""The controller against API-server faults it used to miss (issue 29 point 5 a, d).

(a) An optional API is re-checked for the process lifetime: a LeaderWorkerSet CRD installed
after the controller started is watched; a discovery that fails with a 5xx at start-up keeps
the controller not ready (saying which API) until it answers, then the API is watched.
(d) An API-server outage is one log line when it starts and one when it ends, and a gauge.

A private etcd + kube-apiserver (``support.controlplane``): this module deletes a CRD and
kills the API server, which the session's control plane must not see.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dyn_gitops_operator.errors import NotFoundError, TransientError
from dyn_gitops_operator.kube import LWS, Kube, Resource
from dyn_gitops_operator.testing import running, settings_for_tests, wait_for
from support.binaries import need_binaries
from support.controlplane import ControlPlane, control_plane, install_crds
from support.thirdparty_crds import thirdparty_crds

from dyn_gitops import keys
from dyn_gitops.crds import crds as dynamo_crds

pytestmark = pytest.mark.realk8s
HANG_GUARD = 120.0  # seconds; only against a hang, never reached on a healthy run
LWS_CRD = next(c for c in thirdparty_crds() if c["spec"]["group"] == LWS.group)
REACHABLE = "dyn_gitops_controller_apiserver_reachable"


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    bins = need_binaries("etcd", "kube-apiserver")
    with control_plane(bins["etcd"], bins["kube-apiserver"]) as cp:
        install_crds(cp.client(), dynamo_crds())
        yield cp


@pytest.fixture
def pk(plane: ControlPlane) -> Kube:
    return Kube(plane.client())


@pytest.fixture
def pns(plane: ControlPlane) -> str:
    from kubernetes import client as k8s

    name = f"t-{uuid.uuid4().hex[:10]}"
    k8s.CoreV1Api(plane.client()).create_namespace({"metadata": {"name": name}})
    return name


def _without_lws_crd(plane: ControlPlane, kube: Kube, namespace: str) -> None:
    from kubernetes import client as k8s
    from kubernetes.client.exceptions import ApiException

    try:
        k8s.ApiextensionsV1Api(plane.client()).delete_custom_resource_definition(
            LWS_CRD["metadata"]["name"]
        )
    except ApiException as exc:
        if exc.status != 404:
            raise

    def gone() -> bool:
        try:
            kube.check_listable(LWS, namespace)
        except NotFoundError:
            return True
        return False

    wait_for(gone, timeout=HANG_GUARD, what="LeaderWorkerSet API no longer served")


def _lws(namespace: str, graph: str) -> dict[str, Any]:
    return {
        "apiVersion": LWS.api_version,
        "kind": LWS.kind,
        "metadata": {
            "name": f"{graph}-worker",
            "namespace": namespace,
            "labels": {keys.LABEL_GRAPH_NAME: graph},
        },
        "spec": {"replicas": 1},
    }


def _reconciled(m: Any) -> list[tuple[str, str]]:
    """Every key the manager reconciles from now on (the workers call ``m.reconcile``)."""
    seen: list[tuple[str, str]] = []
    inner = m.reconcile

    def spy(key: tuple[str, str]) -> float | None:
        seen.append(key)
        return inner(key)  # type: ignore[no-any-return]

    m.reconcile = spy  # type: ignore[method-assign]
    return seen


def test_a_crd_installed_after_start_is_watched(plane: ControlPlane, pk: Kube, pns: str) -> None:
    """The controller starts without the LeaderWorkerSet API (known not served: ready);
    the CRD is installed; from the next re-check on LWS is watched, and a change of an
    LWS enqueues its graph (no DGD of that name: only the LWS event can bring the key)."""
    _without_lws_crd(plane, pk, pns)
    with running(settings_for_tests(pns, optional_api_recheck=0.5), pk, timeout=HANG_GUARD) as m:
        assert m.lws is None
        assert m.ready()  # a 404 is an answer: nothing unknown
        seen = _reconciled(m)
        install_crds(plane.client(), [LWS_CRD])
        wait_for(lambda: m.lws is not None, timeout=HANG_GUARD, what="LWS informer")
        pk.create(LWS, _lws(pns, "multinode"))
        wait_for(
            lambda: (pns, "multinode") in seen, timeout=HANG_GUARD, what="the LWS's graph enqueued"
        )
        assert m.lws is not None and m.lws.store.get((pns, "multinode-worker")) is not None
        assert m.ready() and m.healthy()


class FailingDiscovery(Kube):
    """The real client, whose check of the LeaderWorkerSet API answers 503 while
    ``failing`` is set (an API server restarting: an error a real server cannot be made to
    give on demand); ``checks`` counts the failed ones."""

    def __init__(self, inner: Kube) -> None:
        super().__init__(inner.api, inner.timeout)
        self.failing = threading.Event()
        self.failing.set()
        self.failed = 0

    def check_listable(self, res: Resource, namespace: str | None) -> None:
        if res is LWS and self.failing.is_set():
            self.failed += 1
            raise TransientError(503, "ServiceUnavailable", "the server is currently unable")
        super().check_listable(res, namespace)


def _readyz(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:  # not listening yet
        return 0, ""


def test_an_unknown_api_keeps_the_controller_not_ready_until_it_answers(
    plane: ControlPlane, pk: Kube, pns: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Discovery of LWS fails with 503 at start-up (and on the next re-checks): the
    controller acts on the rest but is not ready, /readyz names the API, one warning says
    so; once the check answers, LWS is watched and the controller is ready."""
    install_crds(plane.client(), [LWS_CRD])
    flaky = FailingDiscovery(pk)
    settings = settings_for_tests(
        pns, http_address="127.0.0.1:0", optional_api_retry_base=0.2, optional_api_retry_max=0.5
    )
    caplog.set_level(logging.INFO, logger="dyn_gitops_operator")
    with running(settings, flaky, timeout=HANG_GUARD) as m:
        assert m.lws is None and not m.ready()  # acting on the rest, but not ready
        wait_for(lambda: flaky.failed >= 3, timeout=HANG_GUARD, what="re-checks of LWS")
        assert m.lws is None and not m.ready()
        assert m.http is not None
        code, body = _readyz(m.http.port)
        assert code == 503 and "optional API state unknown: leaderworkersets." in body, body
        unknown = [r for r in caplog.records if r.getMessage().startswith("optional API state")]
        assert [getattr(r, "resource", "") for r in unknown] == [
            f"{LWS.plural}.{LWS.group}"
        ]  # one line, not one per retry
        seen = _reconciled(m)
        flaky.failing.clear()
        wait_for(m.ready, timeout=HANG_GUARD, what="ready once LWS answers")
        assert m.lws is not None
        assert _readyz(m.http.port) == (200, "ok\n")
        pk.create(LWS, _lws(pns, "late"))
        wait_for(lambda: (pns, "late") in seen, timeout=HANG_GUARD, what="the LWS's graph enqueued")


def test_an_api_server_outage_is_logged_once_each_way(
    plane: ControlPlane, pk: Kube, pns: str, caplog: pytest.LogCaptureFixture
) -> None:
    """kube-apiserver killed (etcd keeps running), then started again on the same port:
    one warning when the outage starts, one with its length when it ends, the gauge 0 then
    1; the controller keeps its leadership (long deadline) and is healthy after."""
    from dyn_gitops_operator.settings import LeaderSettings

    caplog.set_level(logging.INFO, logger="dyn_gitops_operator")
    long_lease = LeaderSettings(lease_duration=600, renew_deadline=300, retry_period=0.5)
    with running(settings_for_tests(pns, leader=long_lease), pk, timeout=HANG_GUARD) as m:
        plane.stop_apiserver()
        try:
            wait_for(
                lambda: any(r.getMessage() == "API server unreachable" for r in caplog.records),
                HANG_GUARD,
                "a log line saying the API server is unreachable",
            )
            assert m.metrics.value(REACHABLE) == 0
            wait_for(
                lambda: m.metrics.value("dyn_gitops_controller_apiserver_failures_total") >= 5,
                HANG_GUARD,
                "several failed calls during the outage",
            )
        finally:
            plane.restart_apiserver()
        wait_for(lambda: m.metrics.value(REACHABLE) == 1, HANG_GUARD, "recovery noticed")
        wait_for(m.ready, timeout=HANG_GUARD, what="ready after the outage")
        assert m.acting()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("API server")]
    # one line per change of state, never one per failed retry (a server still starting
    # may answer, then fail once more: that is a change too)
    assert lines[0] == "API server unreachable" and lines[-1] == "API server reachable again"
    assert all(a != b for a, b in itertools.pairwise(lines)), lines
    assert len(lines) < m.metrics.value("dyn_gitops_controller_apiserver_failures_total")
    back = [r for r in caplog.records if r.getMessage() == "API server reachable again"]
    # the line says how long the outage was (a duration is reported, its value not judged)
    assert back and all(isinstance(getattr(r, "outage_seconds", None), float) for r in back)


def test_an_etcd_stall_is_logged_by_the_bounded_lease_calls(
    plane: ControlPlane, pk: Kube, pns: str, caplog: pytest.LogCaptureFixture
) -> None:
    """etcd stopped (SIGSTOP: the API server accepts calls and never answers the ones that
    need etcd, the issue's "15 s etcd outage, no log line"): the leader's bounded lease
    call times out, which is the outage line; etcd resumed, the next renewal answers."""
    from dyn_gitops_operator.settings import LeaderSettings

    caplog.set_level(logging.INFO, logger="dyn_gitops_operator")
    # a renew deadline of 10 s: lease calls time out after 2 s, the outage line comes long
    # before the leadership could end; the hour-long lease keeps any follower out
    lease = LeaderSettings(lease_duration=3600, renew_deadline=10, retry_period=0.5)
    with running(settings_for_tests(pns, leader=lease), pk, timeout=HANG_GUARD) as m:
        plane.etcd.send_signal(signal.SIGSTOP)
        try:
            wait_for(
                lambda: any(r.getMessage() == "API server unreachable" for r in caplog.records),
                HANG_GUARD,
                "a log line while etcd is stopped",
            )
            assert m.metrics.value(REACHABLE) == 0
        finally:
            plane.etcd.send_signal(signal.SIGCONT)
        wait_for(lambda: m.metrics.value(REACHABLE) == 1, HANG_GUARD, "recovery noticed")
        stalled = [r for r in caplog.records if r.getMessage() == "API server unreachable"]
        assert "via" in stalled[0].__dict__


def _scrape(port: int, name: str) -> float | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def test_a_controller_process_logs_an_api_server_outage(
    plane: ControlPlane, pns: str, tmp_path: Path
) -> None:
    """The real process (``python -m dyn_gitops_operator``, JSON logs): kube-apiserver
    killed and started again; its stderr has the outage line, then the recovery line with
    the outage's length, and /metrics follows; it keeps running (leases long enough)."""
    from support.controlplane import free_port

    port = free_port()
    log = tmp_path / "controller.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "dyn_gitops_operator", "--mode", "namespace",
                "--namespace", pns, "--kubeconfig", str(plane.kubeconfig),
                "--http-address", f"127.0.0.1:{port}",
                "--leader-lease-duration", "600", "--leader-renew-deadline", "300",
                "--scope-lease-duration", "600", "--scope-lease-renew-interval", "10",
                "--log-format", "json",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
    try:
        wait_for(lambda: _readyz(port)[0] == 200, HANG_GUARD, "controller ready")
        assert _scrape(port, REACHABLE) == 1
        plane.stop_apiserver()
        try:
            wait_for(lambda: _logged(log, "API server unreachable"), HANG_GUARD, "outage line")
            assert _scrape(port, REACHABLE) == 0
        finally:
            plane.restart_apiserver()
        back = wait_for(lambda: _logged(log, "API server reachable again"), HANG_GUARD, "back")
        assert isinstance(back[-1]["outage_seconds"], int | float)
        assert back[-1]["level"] == "warning"
        wait_for(lambda: _scrape(port, REACHABLE) == 1, HANG_GUARD, "gauge back to 1")
        assert proc.poll() is None, log.read_text()
    finally:
        proc.terminate()
        proc.wait(60)


def _logged(log: Path, msg: str) -> list[dict[str, Any]]:
    """The controller's JSON log lines with message ``msg``."""
    found = []
    for line in log.read_text(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            rec = json.loads(line)
            if isinstance(rec, dict) and rec.get("msg") == msg:
                found.append(rec)
    return found
