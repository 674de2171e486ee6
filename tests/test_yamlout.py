"""The fast YAML writer: everything it writes reads back identically, with PyYAML and with
the YAML 1.1 rules of Go's reader (kubectl, Argo CD, Flux, Helm)."""

from __future__ import annotations

import random
import string

import pytest
import yaml
from support.yaml_cases import TRICKY

from dyn_gitops.yamlout import dump_all, dump_document


def _corpus() -> list[str]:
    rnd = random.Random(7)
    alphabet = string.printable + "é✓\u2028\x85\ufeff\x7f\x9f😀"
    return TRICKY + [
        "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 12))) for _ in range(3000)
    ]


def test_round_trip_with_pyyaml() -> None:
    objs = [
        {
            "k": t,
            t or "e": [t, {"n": t}],
            "l": [[t], []],
            "d": {},
            "i": [1, -2, 3.5, True, None, 10**20, -0.0, 1e300, 1e-5],
        }
        for t in _corpus()
    ]
    assert list(yaml.safe_load_all(dump_all(objs))) == objs


# Plain scalars Go's YAML 1.1 reader (go-yaml v2 via sigs.k8s.io/yaml) does not read as
# strings although PyYAML does; each must be quoted.
GO_NON_STRINGS = [
    *("y", "Y", "n", "N", "1e5", "-2E3", "0o17", "0x1F", "0b1"),
    *("06416192", "0777", "1.", "1_000", "-_1", "99999999999999999999", "2024-1-2"),
]


@pytest.mark.parametrize("value", GO_NON_STRINGS)
def test_strings_go_would_read_as_other_types_are_quoted(value: str) -> None:
    text = dump_document({"v": value})
    assert text in (f"---\nv: '{value}'\n", f'---\nv: "{value}"\n'), text
    # the PyYAML fallback path (taken for values the fast writer does not handle) too
    fallback = dump_document({"v": value, "f": float("nan")})
    assert f"v: '{value}'" in fallback, fallback


def test_ordinary_strings_stay_plain() -> None:
    assert dump_document(
        {"image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0", "n1": "nope"}
    ) == ("---\nimage: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.1.0\nn1: nope\n")


def test_multi_line_strings_are_literal_blocks() -> None:
    assert dump_document({"data": {"cfg": "a: 1\nb: 2\n"}}) == (
        "---\ndata:\n  cfg: |\n    a: 1\n    b: 2\n"
    )


def test_the_epp_config_quotes_as_go_would() -> None:
    """The operator writes the EPP ConfigMap with sigs.k8s.io/yaml, which double-quotes a
    string its own reader would take for another type; so do we."""
    from dyn_gitops.expand.objects import epp_config_map

    params = {"a": "0777", "b": "1.5x", "c": "y", "d": "06416192"}
    cm = epp_config_map("g", "ns", "Frontend", {"plugins": [{"type": "x", "parameters": params}]})
    text = next(iter(cm["data"].values()))
    assert '    a: "0777"\n    b: 1.5x\n    c: "y"\n    d: "06416192"\n' in text
    assert yaml.safe_load(text)["plugins"][0]["parameters"] == params
