"""Setting values are checked like the API field or the Go parser each one lands in (issue 25,
point 5): a name, a label key, a namespace, a duration, a URL, an enum or a limit the cluster
or the operator would refuse is a usage error (exit 2) that says where the value was written
(``dyn-gitops.yaml:<line>``, a subtree's file, the variable, flag or parameter), what was
found and what is expected; every bad setting of a run is reported in that run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli import invoke_cli
from support.inputs import small_dgd

from dyn_gitops.settings import REGISTRY, SettingsError, resolve

DGD = small_dgd("knobs")
#: two valid lines first, so that the line a problem names is not the first by chance
HEAD = "grove: true\nlws: false\n"


@pytest.fixture
def src(tmp_path: Path) -> Path:
    (tmp_path / "dgd.yaml").write_text(DGD, encoding="utf-8")
    return tmp_path


def write_settings(folder: Path, text: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dyn-gitops.yaml").write_text(text, encoding="utf-8")


def refused(res: Any, *needles: str) -> None:
    assert res.code == 2, f"exit {res.code}\nstderr:\n{res.stderr}\nstdout:\n{res.stdout[:400]}"
    assert res.stdout == ""
    assert "Traceback" not in res.stderr
    for needle in needles:
        assert needle in res.stderr, f"{needle!r} not in:\n{res.stderr}"


def objects(res: Any) -> list[dict[str, Any]]:
    assert res.code == 0, res.stderr
    return [o for o in yaml.safe_load_all(res.stdout) if o]


# ------------------------------------------------------------------------- the two reports
def test_operator_release_that_is_no_helm_release_name_is_refused(src: Path) -> None:
    """main renders ``roleRef.name: ../../x-dynamo-operator-planner`` (exit 0)."""
    write_settings(src, "operator-release: ../../x\n")
    refused(
        invoke_cli("render", str(src)),
        "dyn-gitops.yaml:1: operator-release: found '../../x', expected a Helm release name",
    )


def test_termination_delay_beyond_go_duration_range_is_refused(src: Path) -> None:
    """main renders ``terminationDelay: 3000000h0m0s`` (exit 0), past Go's ~292 years."""
    write_settings(src, HEAD + "grove-termination-delay: 3000000h\n")
    refused(
        invoke_cli("render", str(src)),
        "dyn-gitops.yaml:3: grove-termination-delay: found '3000000h', expected a Go duration",
        "to 2562047h47m16.854775807s",
    )


# ------------------------------------------------------------------------- every kind of value
#: (setting, bad value, what is shown as found, start of what is expected); each value would
#: be refused by the API server, Grove's/Istio's webhook or the operator's own validation
BAD = [
    ("namespace", "Team_A", "'Team_A'", "a namespace name"),
    ("operator-release", "Dynamo-Platform", "'Dynamo-Platform'", "a Helm release name"),
    ("operator-release", "a" * 54, "'aaaa", "a Helm release name: at most 53"),
    # a valid Secret name, but it also names the pod volume: a DNS-1123 label
    ("mpi-ssh-secret", "mpi.ssh", "'mpi.ssh'", "a Secret name that is also a pod volume name"),
    ("mpi-ssh-secret", "", "''", "a Secret name that is also a pod volume name"),
    ("ingress-class", "nginx_internal", "'nginx_internal'", "an IngressClass name"),
    ("ingress-tls-secret", "tls/cert", "'tls/cert'", "a Secret name"),
    ("ingress-host-suffix", "example..com", "'example..com'", "a DNS name"),
    ("ingress-host-suffix", "x" * 64 + ".com", "'xxxx", "a DNS name"),
    ("istio-gateway", "istio-system/Main_GW", "'istio-system/Main_GW'", "an Istio gateway"),
    ("istio-gateway", "a/b/c", "'a/b/c'", "an Istio gateway"),
    ("istio-gateway", "gateway.123", "'gateway.123'", "an Istio gateway"),
    ("grove-termination-delay", "-5m", "'-5m'", "a Go duration"),
    ("grove-termination-delay", "1d", "'1d'", "a Go duration"),
    ("grove-termination-delay", "15 minutes", "'15 minutes'", "a Go duration"),
    ("grove-topology-domains", "zone,Rack", "the level 'Rack'", "comma-separated levels"),
    ("grove-topology-domains", "zone,rack,zone", "the level 'zone' twice", "comma-separated"),
    ("grove-topology-domains", "a" * 48, "the level 'aaaa", "comma-separated levels, each at"),
    ("model-express-url", "http://mx:port/", "a string of 15 characters", "a URL that Go's"),
    ("origin-version", "latest", "'latest'", "a version such as 1.5.1, or none"),
    ("origin-version", "1.5." + "9" * 5000, "'1.5.9999", "a version such as 1.5.1"),
    ("discovery-backend", "consul", "'consul'", "one of kubernetes, etcd"),
    ("istio-tls-mode", "mutual", "'mutual'", "one of SIMPLE, DISABLE, ISTIO_MUTUAL, MUTUAL"),
    ("service-mesh", "linkerd", "'linkerd'", 'one of "", istio'),
    ("managed-replicas", "sometimes", "'sometimes'", "true or false"),
    ("max-documents", "lots", "'lots'", "a whole number"),
    ("max-documents", "1e3", "'1e3'", "a whole number"),
    ("max-documents", "0", "0", "a limit from 1 to 2147483647"),
    ("max-depth", "201", "201", "a limit from 1 to 200"),
]


@pytest.mark.parametrize(
    ("name", "value", "found", "expected"),
    BAD,
    ids=[f"{n}-{v[:16]}" for n, v, _, _ in BAD],
)
def test_a_bad_value_in_the_settings_file_names_its_line(
    src: Path, name: str, value: str, found: str, expected: str
) -> None:
    """On main the values of new rules render (exit 0); the others are refused without a
    line (``dyn-gitops.yaml key <name>: setting <name>: expected ..., found ...``)."""
    write_settings(src, HEAD + yaml.safe_dump({name: value}, width=10_000))
    res = invoke_cli("render", str(src))
    refused(res, f"dyn-gitops.yaml:3: {name}: found {found}", f", expected {expected}")
    assert max(len(line) for line in res.stderr.splitlines()) < 1000  # the value is cut


def test_the_same_rules_hold_in_a_subtree_file_and_every_file_is_reported(src: Path) -> None:
    """Root and subtree problems in one run, each at its own file and line; a root value
    every subtree inherits is reported once. main renders both (exit 0)."""
    write_settings(src, "operator-release: ../../x\n")
    write_settings(src / "team", "namespace: team\nmpi-ssh-secret: mpi.ssh\n")
    (src / "team" / "dgd.yaml").write_text(small_dgd("team"), encoding="utf-8")
    write_settings(src / "other", "grove-termination-delay: 1y\n")
    (src / "other" / "dgd.yaml").write_text(small_dgd("other"), encoding="utf-8")
    res = invoke_cli("render", str(src))
    refused(
        res,
        "dyn-gitops.yaml:1: operator-release: found '../../x'",
        "team/dyn-gitops.yaml:2: mpi-ssh-secret: found 'mpi.ssh'",
        "other/dyn-gitops.yaml:1: grove-termination-delay: found '1y'",
    )
    assert res.stderr.count("operator-release: found") == 1


# ------------------------------------------------------------------------- runner sources
def test_runner_values_name_their_flag_variable_or_parameter(src: Path) -> None:
    """main renders all three (exit 0)."""
    bad = "../../x"
    refused(
        invoke_cli("render", str(src), "--operator-release", bad),
        f"flag --operator-release: operator-release: found '{bad}', expected a Helm release",
    )
    refused(
        invoke_cli("render", str(src), env={"DYN_GITOPS_OPERATOR_RELEASE": bad}),
        "environment DYN_GITOPS_OPERATOR_RELEASE: operator-release: found '../../x'",
    )
    with pytest.raises(SettingsError) as err:
        resolve(parameters={"operator-release": bad})
    assert err.value.problems == [
        "parameter operator-release: operator-release: found '../../x', expected a Helm release "
        "name: at most 53 lower-case letters, digits, '-' and '.', each part starting and "
        "ending with a letter or digit (the ClusterRoles <release>-dynamo-operator-planner and "
        "-epp are named after it)"
    ]


def test_every_bad_setting_of_every_source_in_one_run(src: Path) -> None:
    """main stops at the runner's problems (flags, environment) before reading the file,
    and checks neither the operator release nor the host suffix."""
    write_settings(src, "lws: maybe\nmax-documents: 30000\ningress-host-suffix: a..b\n")
    res = invoke_cli(
        "render",
        str(src),
        "--operator-release",
        "../../x",
        env={"DYN_GITOPS_DISCOVERY_BACKEND": "consul"},
    )
    refused(
        res,
        "dyn-gitops.yaml:1: lws: found 'maybe', expected true or false",
        "dyn-gitops.yaml:2: max-documents: found 30000, expected at most 20000 (the default)",
        "dyn-gitops.yaml:3: ingress-host-suffix: found 'a..b', expected a DNS name",
        "environment DYN_GITOPS_DISCOVERY_BACKEND: discovery-backend: found 'consul'",
        "flag --operator-release: operator-release: found '../../x'",
    )
    assert len(res.stderr.splitlines()) == 5


def test_a_url_with_a_password_is_refused_without_echoing_it(src: Path) -> None:
    """main renders it (exit 0) into MODEL_EXPRESS_URL."""
    write_settings(src, "model-express-url: http://admin:hunter2@model-express:grpc/\n")
    res = invoke_cli("render", str(src))
    refused(
        res,
        "dyn-gitops.yaml:1: model-express-url: found a string of 40 characters, expected a "
        "URL that Go's url.Parse accepts (invalid port after host)",
    )
    assert "hunter2" not in res.stderr and "admin" not in res.stderr


def test_a_huge_number_is_not_echoed_whole(src: Path) -> None:
    """main prints the 5,000 digits back (``expected a whole number, found '999...'``)."""
    res = invoke_cli("render", str(src), env={"DYN_GITOPS_MAX_DOCUMENTS": "9" * 5000})
    refused(res, "environment DYN_GITOPS_MAX_DOCUMENTS: max-documents: found '9999")
    assert len(res.stderr) < 400


# ------------------------------------------------------------------------- what Go accepts
@pytest.mark.parametrize(
    ("value", "rendered"),
    [
        ("1.5h", "1h30m0s"),
        ("300ms", "300ms"),
        ("1h0.5s", "1h0m0.5s"),
        ("2562047h47m16.854775807s", "2562047h47m16.854775807s"),  # the largest
        ("0", None),  # the operator sets none
    ],
)
def test_a_go_duration_renders_as_go_spells_it(src: Path, value: str, rendered: str | None) -> None:
    """time.ParseDuration's grammar, Duration.String's spelling; main refuses each of these
    (exit 2: only whole h, m and s)."""
    write_settings(src, f"grove: true\ngrove-termination-delay: {value!r}\n")
    [pcs] = [o for o in objects(invoke_cli("render", str(src))) if o["kind"] == "PodCliqueSet"]
    assert pcs["spec"]["template"].get("terminationDelay") == rendered


def test_every_text_setting_that_reaches_an_object_has_a_rule() -> None:
    """The audit: a text setting without a rule is passed through as an env value or a file
    path, which the API server takes as any string. main has no rules (AttributeError)."""
    unchecked = {s.name for s in REGISTRY if s.kind is str and not s.choices and not s.rules}
    assert unchecked == {
        # env values of every pod (AddStandardEnvVars, AddTransportTLSEnvVars)
        "nats-address",
        "etcd-address",
        "prometheus-endpoint",
        "nats-tls-ca-path",
        "nats-tls-client-cert-path",
        "nats-tls-client-key-path",
        "tcp-tls-cert-path",
        "tcp-tls-key-path",
        "tcp-tls-ca-path",
        "tcp-tls-client-cert-path",
        "tcp-tls-client-key-path",
        "tcp-tls-client-ca-path",
        "tcp-tls-server-name",
        # file paths in the EPP DestinationRule (Istio checks only that MUTUAL has them)
        "istio-client-certificate",
        "istio-private-key",
        "istio-ca-certificates",
    }
    for spec in REGISTRY:  # and every default passes its own rules
        assert spec.parse(spec.default) == spec.default, spec.name
