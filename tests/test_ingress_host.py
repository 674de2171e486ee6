"""An Ingress host the API server would refuse is an input error (exit 1), not an object
the apply fails on: the host is ``<hostPrefix><host>.<hostSuffix>`` of a service's ingress,
or ``<DGD name>.<ingress-host-suffix>`` for the default ingress of a frontend, so each part
may be fine alone and the whole still not a DNS name (too long, an upper-case letter, an
IP address)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from support.cli import invoke_cli

SAMPLE = Path(__file__).parent.parent / "samples" / "ingress-virtualservice" / "input"


def _sample(tmp_path: Path, **ingress: str) -> Path:
    docs = list(yaml.safe_load_all((SAMPLE / "vllm-agg.yaml").read_text()))
    services = docs[0]["spec"]["services"]
    frontend = next(s for s in services.values() if s.get("ingress"))
    frontend["ingress"].update(ingress)
    (tmp_path / "vllm-agg.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False))
    (tmp_path / "dyn-gitops.yaml").write_text((SAMPLE / "dyn-gitops.yaml").read_text())
    return tmp_path


@pytest.mark.parametrize(
    ("ingress", "why"),
    [
        ({"host": "x" * 250}, "must be at most 253 characters"),
        ({"host": "Vllm"}, "is not a DNS-1123 subdomain"),
        ({"hostPrefix": "", "host": "10.0.0", "hostSuffix": "1"}, "is an IP address"),
    ],
)
def test_an_ingress_host_that_is_no_dns_name_is_refused(
    tmp_path: Path, ingress: dict[str, str], why: str
) -> None:
    res = invoke_cli("render", str(_sample(tmp_path, **ingress)))
    assert res.code == 1, res.stderr
    assert res.stdout == ""
    assert "Ingress/" in res.stderr and "spec.rules[0].host: the Ingress host" in res.stderr
    assert why in res.stderr
    assert "vllm-agg.yaml:" in res.stderr


def test_the_sample_ingress_host_renders(tmp_path: Path) -> None:
    res = invoke_cli("render", str(_sample(tmp_path)))
    assert res.code == 0, res.stderr
    assert "host: internal-vllm.corp.example.net" in res.stdout
