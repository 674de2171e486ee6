"""The tiny client of the warm render server, and the sidecar's ``dyn-gitops`` launcher.

Argo CD starts one process per ``generate``. A full Python start with pydantic costs
several hundred milliseconds, so the sidecar keeps one warm render server (see
:mod:`.server`) and ``generate`` is a client that starts in a few milliseconds: it imports
only ``posix``, ``sys`` and ``_socket`` (not even ``os``), hands its stdout/stderr file
descriptors, working directory and environment to the server, and exits with the code the
server's forked child reports. The child writes the output straight into our stdout, so
nothing is copied and "all or nothing" holds exactly as in-process.

When no server answers, the caller renders in-process (same code) and, under Argo CD,
starts a server in the background for the next call. When the server answers :data:`BUSY`
(its bounded queue is full), the caller renders in-process too, and starts nothing.
"""

from __future__ import annotations

import _socket
import posix
import sys

MAGIC = b"DGC1"
HEADER_LEN = len(MAGIC) + 8  # magic + payload length (big-endian)
DEAD_SERVER = 3  # internal error: the server's child ended without a status
#: the server's answer instead of an exit code when it cannot take the request now
BUSY = b"busy\n"
#: :func:`via_server`'s result then: nothing was written, render in-process
SERVER_BUSY = -1


def socket_dir(environ: dict[bytes, bytes] | None = None) -> str:
    env = posix.environ if environ is None else environ
    tmp = env.get(b"TMPDIR", b"/tmp").decode("utf-8", "surrogateescape") or "/tmp"
    return f"{tmp.rstrip('/') or '/'}/dyn-gitops-{posix.getuid()}"


def socket_path(version: str, environ: dict[bytes, bytes] | None = None) -> str:
    return f"{socket_dir(environ)}/render-{version}.sock"


def _private(directory: str) -> bool:
    """Ours and not writable by others: only then trust a server listening there."""
    try:
        st = posix.lstat(directory)
    except OSError:
        return False
    return (
        st.st_mode & 0o170000 == 0o040000
        and st.st_uid == posix.getuid()
        and st.st_mode & 0o022 == 0
    )


def encode_request(cwd: bytes, environ: dict[bytes, bytes]) -> bytes:
    parts = [cwd] + [k + b"=" + v for k, v in environ.items() if b"\0" not in k + v]
    return b"\0".join(parts)


def decode_request(payload: bytes) -> tuple[bytes, dict[bytes, bytes]]:
    cwd, *pairs = payload.split(b"\0")
    env: dict[bytes, bytes] = {}
    for pair in pairs:
        key, sep, value = pair.partition(b"=")
        if sep:
            env[key] = value
    return cwd, env


def via_server(version: str) -> int | None:
    """Render through a running server and return its exit code; None when there is none,
    :data:`SERVER_BUSY` when it is at its bound (nothing was written either way)."""
    path = socket_path(version)
    if not _private(path.rpartition("/")[0]):
        return None
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        try:
            sock.connect(path)
        except OSError:
            return None
        payload = encode_request(posix.getcwdb(), dict(posix.environ))
        header = MAGIC + len(payload).to_bytes(8, "big")
        fds = b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in (1, 2))
        try:
            sock.sendmsg([header], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
            sock.sendall(payload)
        except OSError:
            return None  # the server went away before taking the request: nothing written
        status = b""
        while True:
            try:
                chunk = sock.recv(64)
            except OSError:
                break
            if not chunk:
                break
            status += chunk
    finally:
        sock.close()
    if status.strip().isdigit():
        return int(status)
    if status == BUSY:
        posix.write(2, b"dyn-gitops: the warm render server is busy; rendering in-process\n")
        return SERVER_BUSY
    posix.write(
        2,
        b"dyn-gitops: internal error: the render server ended without an answer; "
        b"retry (Argo CD: hard refresh)\n",
    )
    return DEAD_SERVER


def start_server(python: str, version: str) -> None:
    """Start a server in the background, detached (it outlives this process)."""
    path = socket_path(version)
    pid = posix.fork()
    if pid:
        posix.waitpid(pid, 0)
        return
    try:  # first child: new session, fork again so the server is nobody's child here
        posix.setsid()
        if posix.fork():
            posix._exit(0)
        null = posix.open("/dev/null", posix.O_RDWR)
        for fd in (0, 1, 2):  # Argo CD waits for our stdout/stderr to close: never keep them
            posix.dup2(null, fd)
        posix.closerange(3, 65536)
        posix.chdir("/")  # never in the application directory: Argo CD deletes it
        # -P: nothing imported from the working directory (a repository's files)
        posix.execv(
            python, [python, "-P", "-c", "from dyn_gitops.argocd.server import main; main()", path]
        )
    finally:
        posix._exit(127)


def launch(python: str, version: str) -> None:
    """The sidecar's ``dyn-gitops``: fast ``cmp generate``, everything else the full CLI."""
    args = sys.argv[1:]
    if args == ["cmp", "generate"]:
        code = via_server(version)
        if code is not None and code != SERVER_BUSY:
            posix._exit(code)
        if code is None and posix.environ.get(b"ARGOCD_APP_NAME"):
            start_server(python, version)
        args = ["cmp", "generate", "--server", "off"]
    posix.execv(
        python,
        [
            python,
            "-P",
            "-c",
            "import sys; sys.argv[0] = 'dyn-gitops'; from dyn_gitops.oneshot import main; main()",
            *args,
        ],
    )
