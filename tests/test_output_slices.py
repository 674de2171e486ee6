"""A large output is measured and written without a second whole copy in memory (peak RSS
of 1,000 DGDs, issue 13): the size check counts an ASCII stream's characters, and stdout
gets an ASCII stream in slices. The bytes and the size must be exactly what encoding the
whole text gives."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dyn_gitops import emit, stdio

TEXTS = [
    "",
    "plain: ascii\n",
    "x" * (3 * stdio._SLICE + 17),  # several slices and a short last one
    "a" * stdio._SLICE,  # exactly one slice
    "é" * 1000 + "\n",
    "ascii first " * 200_000 + "then a snowman \u2603 and \U0001f600\n",
]


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_utf8_size_is_the_encoded_length(text: str) -> None:
    assert emit.utf8_size(text) == len(text.encode("utf-8"))


_WRITER = """
import sys
from dyn_gitops import stdio
text = sys.stdin.buffer.read().decode("utf-8")
stdio.write_stdout(text)
"""


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_stdout_gets_exactly_the_encoded_text(text: str) -> None:
    data = text.encode("utf-8")
    proc = subprocess.run(
        [sys.executable, "-c", _WRITER], input=data, capture_output=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout == data


def test_the_size_limit_counts_bytes_not_characters() -> None:
    """max-output-bytes: a non-ASCII stream is measured encoded (2 bytes per é)."""
    objects = [{"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "é" * 100}}]
    text = emit.render_text(objects, "yaml")
    size = len(text.encode("utf-8"))
    assert size > len(text)
    emit.render_text(objects, "yaml", max_bytes=size)
    with pytest.raises(emit.OutputTooLarge):
        emit.render_text(objects, "yaml", max_bytes=size - 1)
