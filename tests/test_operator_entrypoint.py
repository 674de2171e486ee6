"""What the controller's entry point shows a person: its flags (each with help and a default),
its version (one format: ``dyn-gitops --version``'s, the package version, the build-info
metric's label), its metrics (no ``*_created`` series) and its log lines (JSON or text,
RFC 3339 timestamps, short reasons: never a raw HTTP body, never the token).

The log tests run the real ``python -m dyn_gitops_operator`` against a stub API server that
answers every call ``404 page not found`` (text/plain), as a proxy or the API server's mux
does for a path it does not serve (``support.ctrlproc``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from dyn_gitops_operator import __version__
from dyn_gitops_operator.__main__ import parser
from dyn_gitops_operator.metrics import HealthServer, Metrics
from prometheus_client.parser import text_string_to_metric_families
from support.ctrlproc import TOKEN, controller_lines, not_found_apiserver

ROOT = Path(__file__).resolve().parent.parent
RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
#: the checks of every optional API (LWS, PodClique, PCSG, DynamoModel) logged once each
OPTIONAL_APIS = 4


def _run(module: str, *args: str) -> str:
    """The console script ``module:main`` (as pyproject.toml installs it) with ``args``."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'operator'}"}
    code = f"import sys; from {module} import main; sys.exit(main())"
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_every_flag_has_a_help_and_shows_its_default() -> None:
    p = parser()
    for action in p._actions:
        if isinstance(action, argparse._HelpAction | argparse._VersionAction):
            continue
        flag = action.option_strings[0]
        assert action.help, f"{flag} has no help"
        fmt = p._get_formatter()
        fmt.add_argument(action)  # the flag's entry in --help, as printed
        entry = fmt.format_help()
        assert "default" in entry, f"{flag} shows no default:\n{entry}"
    assert "--log-format {text,json}" in p.format_help()


def test_one_version_format() -> None:
    """``dyn-gitops-operator --version`` reads like ``dyn-gitops --version``; both name the
    package version, and so does the build-info metric."""
    assert (
        _run("dyn_gitops_operator.__main__", "--version")
        == f"dyn-gitops-operator, version {__version__}"
    )
    assert _run("dyn_gitops.oneshot", "--version") == f"dyn-gitops, version {__version__}"
    info = Metrics().registry.get_sample_value(
        "dyn_gitops_controller_build_info", {"version": __version__}
    )
    assert info == 1


def test_metrics_has_no_created_series() -> None:
    """Scraped from /metrics as Prometheus would: not one ``*_created`` series."""
    metrics = Metrics()
    server = HealthServer("127.0.0.1:0", metrics, lambda: True, lambda: True)
    server.start()
    try:
        url = f"http://127.0.0.1:{server.port}/metrics"
        with urllib.request.urlopen(url, timeout=30) as r:
            body = r.read().decode()
    finally:
        server.stop()
    names = [s.name for f in text_string_to_metric_families(body) for s in f.samples]
    created = sorted({n for n in names if n.endswith("_created")})
    assert not created, f"{len(created)} *_created series: {created}"
    assert "_created" not in body
    assert "dyn_gitops_controller_build_info" in names and len(names) > 100


def _checked(lines: list[str]) -> bool:
    """Every optional API's check logged, and an informer's failed list."""
    return sum("optional API checked" in ln for ln in lines) >= OPTIONAL_APIS and any(
        "watch failed" in ln for ln in lines
    )


@pytest.fixture(scope="module")
def json_lines(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The log of one run with ``--log-format json``."""
    with not_found_apiserver(tmp_path_factory.mktemp("stub")) as kubeconfig:
        return controller_lines(kubeconfig, ["--log-format", "json"], _checked)


def test_reasons_are_short_never_a_raw_body(json_lines: list[str]) -> None:
    """The stub's ``404 page not found\\n`` body is nowhere: the reason is the status's."""
    records = [json.loads(ln) for ln in json_lines]
    checked = [r for r in records if r["msg"] == "optional API checked"]
    assert {r["reason"] for r in checked} == {"404 NotFound"}, checked
    assert {r["state"] for r in checked} == {"not served"}, checked
    failed = [r for r in records if r["msg"] == "watch failed, retrying"]
    assert failed and {r["error"] for r in failed} == {"404 NotFound"}, failed
    text = "\n".join(json_lines)
    assert "page not found" not in text and "\\n" not in text, text
    assert TOKEN not in text


def test_json_logs_have_rfc3339_timestamps(json_lines: list[str]) -> None:
    records = [json.loads(ln) for ln in json_lines]
    assert records and all(set(r) >= {"ts", "level", "logger", "msg"} for r in records)
    for r in records:
        assert isinstance(r["ts"], str) and RFC3339.fullmatch(r["ts"]), r


def test_text_logs_are_the_default(tmp_path: Path) -> None:
    """``<RFC 3339> <LEVEL> <logger>: <message> key=value ...``, one record per line."""
    with not_found_apiserver(tmp_path) as kubeconfig:
        lines = controller_lines(kubeconfig, [], _checked)
    line = re.compile(r"(\S+) (DEBUG|INFO|WARNING|ERROR) +([\w.]+): (.+)")
    for ln in lines:
        m = line.fullmatch(ln)
        assert m and RFC3339.fullmatch(m[1]), ln
    checked = [ln for ln in lines if "optional API checked" in ln]
    assert checked and all('state="not served" reason="404 NotFound"' in ln for ln in checked)
    assert not any("page not found" in ln or TOKEN in ln for ln in lines), lines


def test_api_errors_read_as_a_short_reason_and_one_redacted_line() -> None:
    """Any refused call: a Status body gives its reason and message (one line, quoted
    values redacted); any other body (a proxy's HTML page) is dropped for the status's."""
    from dyn_gitops_operator.kube import _error_from

    html = b"<html>\n<body>503 Service Temporarily Unavailable</body>\n</html>\n"
    assert str(_error_from(503, html)) == "503 ServiceUnavailable"
    assert str(_error_from(404, b"404 page not found\n")) == "404 NotFound"
    status = {
        "kind": "Status",
        "reason": "Invalid",
        "message": 'Deployment "d" is invalid:\n  spec.x: Invalid value: "hunter2": bad',
    }
    exc = _error_from(422, json.dumps(status).encode())
    assert (
        str(exc)
        == '422 Invalid: Deployment "d" is invalid: spec.x: Invalid value: "<redacted>": bad'
    )
    assert _error_from(409, b'{"reason": "not a reason\\n", "message": ""}').reason == "Conflict"
