"""The shared test helpers behave as the tests relying on them assume (tests/support)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.golden import check_golden
from support.paths import SAMPLES
from support.rendering import AS_APPLIED, render, renderer

SAMPLE = SAMPLES / "vllm-agg" / "input" / "vllm-agg.yaml"


def test_golden_passes_on_equal_bytes_and_fails_with_a_diff(tmp_path: Path) -> None:
    golden = tmp_path / "out.txt"
    golden.write_bytes(b"a\nb\n")
    check_golden(golden, "a\nb\n", False, produced_by="cmd")
    with pytest.raises(pytest.fail.Exception) as info:
        check_golden(golden, "a\nc\n", False, produced_by="cmd")
    assert "-b\n+c" in str(info.value) and "+++ cmd" in str(info.value)
    with pytest.raises(pytest.fail.Exception, match="missing; create it with `--update-golden`"):
        check_golden(tmp_path / "absent.txt", "x", False, produced_by="cmd")
    assert golden.read_bytes() == b"a\nb\n"  # never written without --update-golden


def test_golden_is_written_only_by_update(tmp_path: Path) -> None:
    golden = tmp_path / "sub" / "out.txt"
    check_golden(golden, "new\n", True, produced_by="cmd")
    assert golden.read_bytes() == b"new\n"
    check_golden(golden, b"newer\n", True, produced_by="cmd")
    assert golden.read_bytes() == b"newer\n"


def test_render_takes_a_path_or_documents_alike(tmp_path: Path) -> None:
    import yaml

    docs = [d for d in yaml.safe_load_all(SAMPLE.read_text()) if d]
    from_path = render(SAMPLE, **AS_APPLIED)  # the same file name: the source-path annotation
    assert render(docs, file=SAMPLE.name, **AS_APPLIED) == from_path
    assert renderer(file=SAMPLE.name, **AS_APPLIED)(tmp_path, *docs) == from_path
    assert (tmp_path / SAMPLE.name).is_file()  # written where the test can see it


def test_render_applied_to_a_namespace_stamps_every_object() -> None:
    objs = render(SAMPLE, "team-a")
    assert {o["metadata"]["namespace"] for o in objs} == {"team-a"}
