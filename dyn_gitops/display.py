"""What may be shown of user input: the redaction rule and the escaping of control characters.

Everything dyn-gitops prints that carries a string from the input (problem lines, KRM result
messages, the ``diff`` reports) goes through here, so the rule lives in one place.

**Redaction.** A value is *sensitive* when its field path

* lies under ``data`` or ``stringData`` of a ``Secret``;
* passes through a key that names a credential: it contains ``passw``, ``passphrase``,
  ``secret``, ``token``, ``credential``, ``auth``, ``cert``, ``cookie``, ``apikey``/``api_key``
  /``api-key``, ``accesskey`` or ``privatekey`` (any case); keys that only *refer* to a
  credential by name do not count, so a reviewer still sees which Secret is used: keys ending
  in ``Ref``, ``Name`` or ``Names`` (``secretKeyRef``, ``secretRef``, ``secretName``),
  ``imagePullSecrets``, a v1alpha1 service's ``envFromSecret`` (a Secret's name), and a
  ``secret`` key that holds a block (a volume's ``secret``; a ``secret`` key holding a
  value is sensitive);
* is the ``value`` of an ``env``/``envs`` entry whose ``name`` names a credential (same
  words: ``HF_TOKEN``, ``DB_PASSWORD``, ``AWS_SECRET_ACCESS_KEY``).
* is the ``kubectl.kubernetes.io/last-applied-configuration`` annotation of any object: it
  is the whole object again as one JSON string (a Secret's data, env values); nothing in it
  is for review, so it is hidden whole.

**Embedded text.** A string value can carry a document of its own: the ``nvidia.com/dgd-spec``
annotation (the v1alpha1 spec, env values included), ``DYN_DEPLOYMENT_CONFIG``, any annotation
or env value written as JSON. Redaction goes by structure, not by searching the text: a string
that holds a JSON or YAML object or array (JSON read with the bounded reader,
:mod:`.bounded`; YAML only without anchors or aliases; both within
:data:`EMBEDDED_MAX_CHARS`, :data:`EMBEDDED_MAX_DEPTH` and :data:`EMBEDDED_MAX_NODES`) is
redacted as a document of its own, with the rules above (its ``kind`` when it says one), its
strings in turn up to :data:`EMBEDDED_MAX_NESTING` texts deep, and shown re-encoded as JSON.
A document that cannot be read within those bounds (too big, too deep, an alias, a bad tag;
a text that starts like JSON but is neither JSON nor YAML), or that lies deeper, is hidden
whole when it names a credential anywhere. Text that is no document (a script, a sentence)
is plain text. ``diff`` compares two such documents field by field (``path{json}.inner``).

Error messages are stricter (``strict=True``): they also never show any env value, ``args`` or
``command``, whatever the names; a message only needs the value's type. Sensitive values are
shown as ``(redacted)`` in ``diff`` and described by type and size in error messages
(``found a string of 23 characters``); ``true``, ``false`` and ``null`` are always shown.
``args``/``command`` in ``diff`` are shown (they are reviewed configuration), except the value
of a credential-named flag (``--hf-token X``, ``--api-key=X``).

**Escaping.** :func:`printable` turns control characters (C0, DEL, C1), invisible format
characters (bidi overrides, zero-width characters), line and paragraph separators and lone
surrogates into visible escapes (``\\n``, ``\\x1b``, ``\\u202e``), so a name cannot forge an
extra problem line or drive the terminal. Backslashes are left as they are.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Any

from .bounded import EmbeddedError, json_loads_bounded, loads_yaml
from .keys import ANN_KUBECTL_LAST_APPLIED

REDACTED = "(redacted)"
#: bounds of a document embedded in a string: a text beyond them is not read (see the rule)
EMBEDDED_MAX_CHARS = 1 << 20
EMBEDDED_MAX_DEPTH = 64
EMBEDDED_MAX_NODES = 20_000
#: embedded texts inside embedded texts (``DYN_DEPLOYMENT_CONFIG`` in ``nvidia.com/dgd-spec``)
EMBEDDED_MAX_NESTING = 4

_CREDENTIAL = re.compile(
    r"passw|passphrase|secret|token|credential|auth|cert|cookie|"
    r"api[-_]?key|access[-_]?key|private[-_]?key",
    re.IGNORECASE,
)
#: keys that hold the *name* of a Secret or key, not a credential
_REFERENCE = re.compile(r"(ref|name|names)$|^(imagePullSecrets|envFromSecret)$", re.IGNORECASE)
_ENV_LISTS = ("env", "envs")
_STRICT_LISTS = ("env", "envs", "args", "command")
_INVISIBLE = frozenset(("Cc", "Cf", "Cs", "Zl", "Zp"))
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_FLAG = re.compile(r"(--?[A-Za-z0-9][A-Za-z0-9_.-]*)(=.*)?", re.DOTALL)
#: a line of a YAML mapping or list of mappings (``key: value``, ``- key:``): YAML text
_YAML_KEY = re.compile(r"^[ \t]*(?:-[ \t]+)?[\"']?[\w./-]+[\"']?[ \t]*:(?:[ \t]|$)", re.M)

Loc = Sequence[str | int]


# ---------------------------------------------------------------------------- escaping
def _escape(ch: str) -> str:
    if ch in _SHORT:
        return _SHORT[ch]
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def count(n: int, noun: str) -> str:
    """``1 file``, ``2 files``: a count and its noun, plural unless it is one (``noun`` is
    the singular; nouns that end in y or s take their usual plural)."""
    if n == 1:
        return f"{n} {noun}"
    if noun.endswith("y"):
        return f"{n} {noun[:-1]}ies"
    return f"{n} {noun}es" if noun.endswith("s") else f"{n} {noun}s"


def printable(text: str) -> str:
    """``text`` with every control or invisible character written as a visible escape."""
    if text.isprintable():  # fast path: the common case has nothing to escape
        return text
    return "".join(_escape(c) if unicodedata.category(c) in _INVISIBLE else c for c in text)


def internal_error(exc: BaseException) -> str:
    """The line for a bug (exit 3): the exception's type and where dyn-gitops raised it,
    never its text, which can carry input (a pydantic error repeats the value it refused,
    an env value as well as any other)."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "dyn_gitops" in f.filename] or frames
    where = ""
    if ours:
        path = ours[-1].filename.replace("\\", "/")
        path = path[path.rfind("dyn_gitops/") :] if "dyn_gitops/" in path else path
        where = f" at {path}:{ours[-1].lineno}"
    return printable(
        f"dyn-gitops: internal error: {type(exc).__name__}{where} "
        "(set DYN_GITOPS_DEBUG=1 for a traceback; please report it)"
    )


# ---------------------------------------------------------------------------- redaction
def names_credential(key: str) -> bool:
    """A field or env var name that says it holds a credential (see the module rule)."""
    return bool(_CREDENTIAL.search(key)) and not _REFERENCE.search(key)


def is_sensitive(
    loc: Loc, *, kind: str | None = None, env_name: str | None = None, strict: bool = False
) -> bool:
    """Whether the value at field path ``loc`` of an object of ``kind`` may not be shown.

    ``env_name`` is the ``name`` of the env entry ``loc`` points into, when known.
    """
    keys = [k for k in loc if isinstance(k, str)]
    if kind == "Secret" and keys and keys[0] in ("data", "stringData"):
        return True
    if keys[:3] == ["metadata", "annotations", ANN_KUBECTL_LAST_APPLIED]:
        return True
    # a ``secret`` block (volume source) holds references; a ``secret`` value is one
    if any(
        names_credential(k) and (k != "secret" or i == len(keys) - 1) for i, k in enumerate(keys)
    ):
        return True
    for i, part in enumerate(loc):
        if part in _STRICT_LISTS and strict:
            return True
        if (
            part in _ENV_LISTS
            and i + 2 < len(loc)
            and loc[i + 2] == "value"
            and env_name is not None
            and names_credential(env_name)
        ):
            return True
    return False


class _Unreadable:
    def __repr__(self) -> str:
        return "(unreadable)"


#: what :func:`read_embedded` gives for a text that looks like a document it cannot read
UNREADABLE: Any = _Unreadable()


def read_embedded(text: str) -> Any:
    """The JSON or YAML object or array ``text`` holds; None for plain text (a script, a
    sentence, a text YAML does not read); :data:`UNREADABLE` for a text that is a document
    but not readable here within bounds (or that starts like JSON and is no document)."""
    json_like = text.lstrip()[:1] in ("{", "[")
    if not json_like and not _YAML_KEY.search(text):
        return None
    if len(text) > EMBEDDED_MAX_CHARS:
        return UNREADABLE
    data: Any = None
    if json_like:
        try:
            data = json_loads_bounded(text, max_depth=EMBEDDED_MAX_DEPTH)
        except (ValueError, RecursionError):  # not JSON, too deep, too many digits
            data = None
    if not isinstance(data, dict | list):
        data = _read_yaml(text)  # also JSON's flow-style cousin, {a: 1}
    if isinstance(data, dict | list) or data is UNREADABLE:
        return data
    return UNREADABLE if json_like else None


def _read_yaml(text: str) -> Any:
    """The YAML document ``text`` holds (:func:`.bounded.loads_yaml`); None when it is no
    YAML; :data:`UNREADABLE` when it is beyond bounds or cannot be built."""
    try:
        return loads_yaml(text, max_depth=EMBEDDED_MAX_DEPTH, max_nodes=EMBEDDED_MAX_NODES)
    except EmbeddedError:
        return UNREADABLE


def embedded_kind(data: Any) -> str | None:
    """The ``kind`` an embedded document says it is (a last-applied copy of a Secret)."""
    kind = data.get("kind") if isinstance(data, dict) else None
    return kind if isinstance(kind, str) else None


def redact_text(text: str, *, nesting: int = 0) -> str:
    """``text`` as it may be shown: itself when it holds no credential, an embedded document
    re-encoded with its credentials redacted, or :data:`REDACTED` when it cannot be read
    (see the module rule). ``nesting``: how many embedded texts ``text`` already lies in."""
    data = read_embedded(text)
    if data is None:
        return text
    if data is UNREADABLE or nesting >= EMBEDDED_MAX_NESTING:
        return REDACTED if _CREDENTIAL.search(text) else text
    shown = redact_tree(data, kind=embedded_kind(data), nesting=nesting + 1)
    if shown == data:
        return text
    import json  # only when a text is shown redacted

    try:  # YAML can hold what JSON cannot write (a date as a key): then nothing of it
        return json.dumps(shown, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return REDACTED


def describe(value: Any, *, sensitive: bool) -> str:
    """``value`` for an error message: shown if harmless, else its type and size only.

    Mappings and lists are never shown (they can be large or hold sensitive fields).
    """
    if value is None or isinstance(value, bool):
        return "null" if value is None else str(value).lower()
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list | tuple):
        return f"a list of {len(value)} item{'s' if len(value) != 1 else ''}"
    if sensitive or (isinstance(value, str) and redact_text(value) != value):
        if isinstance(value, str):
            return f"a string of {len(value)} character{'s' if len(value) != 1 else ''}"
        return "a number" if isinstance(value, int | float) else f"a {type(value).__name__}"
    shown = repr(value)
    if len(shown) > 80 and isinstance(value, str):  # keep the line short, quotes balanced
        return f"{shown[:76]}...{shown[0]}"
    return shown


def redact_argv(argv: list[Any]) -> list[Any]:
    """``args``/``command`` with the value of every credential-named flag redacted."""
    out: list[Any] = []
    hide_next = False
    for arg in argv:
        if hide_next and isinstance(arg, str):
            out.append(REDACTED)
            hide_next = False
            continue
        hide_next = False
        m = _FLAG.fullmatch(arg) if isinstance(arg, str) else None
        if m and names_credential(m.group(1)):
            if m.group(2) is None:
                hide_next = True
                out.append(arg)
            else:
                out.append(f"{m.group(1)}={REDACTED}")
            continue
        out.append(arg)
    return out


def redact_tree(
    value: Any,
    loc: Loc = (),
    *,
    kind: str | None = None,
    env_name: str | None = None,
    nesting: int = 0,
) -> Any:
    """A copy of ``value`` (found at ``loc`` in an object of ``kind``) with every sensitive
    leaf replaced by :data:`REDACTED` and every string holding a document redacted by its
    structure (:func:`redact_text`; ``nesting`` as there); mapping keys are kept, so changed
    keys stay visible."""
    if isinstance(value, dict):
        name = value.get("name")
        if _in_env_list(loc) and isinstance(name, str):
            env_name = name
        return {
            k: redact_tree(v, (*loc, str(k)), kind=kind, env_name=env_name, nesting=nesting)
            for k, v in value.items()
        }
    if isinstance(value, list):
        if loc and loc[-1] in ("args", "command"):
            value = redact_argv(value)
        return [
            redact_tree(v, (*loc, i), kind=kind, env_name=env_name, nesting=nesting)
            for i, v in enumerate(value)
        ]
    if value is None or isinstance(value, bool) or value == REDACTED:
        return value
    if is_sensitive(loc, kind=kind, env_name=env_name):
        return REDACTED
    return redact_text(value, nesting=nesting) if isinstance(value, str) else value


def _in_env_list(loc: Loc) -> bool:
    """``loc`` is an entry of an env list (``...env[3]``)."""
    return len(loc) >= 2 and isinstance(loc[-1], int) and loc[-2] in _ENV_LISTS
