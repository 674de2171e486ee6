"""The warm render server inside the sidecar (see :mod:`.client` for why it exists).

One process imports the renderer once and listens on a Unix socket in a private directory
under ``$TMPDIR``. Each request forks a child that takes the client's stdout/stderr (passed
as file descriptors), working directory and environment, runs exactly the code of the
in-process path (:func:`.generate.run`), and reports its exit code. Forking keeps requests
isolated (nothing one render does can leak into the next) and lets Argo CD's concurrent
generations use every core.

The server serves only its own user (``SO_PEERCRED``), holds a lock so one server runs per
socket, and exits when its socket file is removed or replaced, on SIGTERM, or after
``--idle-timeout`` seconds without a request (0: never; the default, because in the
sidecar the exit would leave a zombie under argocd-cmp-server, which reaps no orphans).
"""

from __future__ import annotations

import errno
import fcntl
import gc
import io
import os
import signal
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

from .client import HEADER_LEN, MAGIC, decode_request

CHILD_TIMEOUT_S = 300  # a render takes seconds; Argo CD gives up long before this
MAX_CHILDREN = max(2, (os.cpu_count() or 1) * 2)
_WARMUP_DGD = """\
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata: {name: warmup}
spec:
  services:
    Frontend: {componentType: frontend}
    Worker:
      componentType: worker
      resources: {limits: {gpu: "1"}}
"""


def _log(line: str) -> None:
    sys.stderr.write(f"dyn-gitops render server {os.getpid()}: {line}\n")
    sys.stderr.flush()


def _warm_up() -> None:
    """Import everything a render touches and render once, before the first fork."""
    from . import generate

    with tempfile.TemporaryDirectory(prefix="dyn-gitops-warmup-") as tmp:
        Path(tmp, "graph.yaml").write_text(_WARMUP_DGD)
        cwd = os.getcwd()
        saved = os.dup(1), os.dup(2)
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.chdir(tmp)
            os.dup2(null, 1)
            os.dup2(null, 2)
            generate.run({})
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in (*saved, null):
                os.close(fd)
            os.chdir(cwd)
    gc.collect()
    gc.freeze()  # keep the warm heap shared with the children (copy-on-write)


def _recv_request(conn: socket.socket) -> tuple[list[int], bytes, dict[bytes, bytes]]:
    fds: list[int] = []
    header = b""
    while len(header) < HEADER_LEN:
        data, ancdata, _flags, _addr = conn.recvmsg(HEADER_LEN - len(header),
                                                    socket.CMSG_SPACE(2 * 4))
        for level, kind, raw in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                usable = len(raw) - len(raw) % 4
                fds.extend(struct.unpack(f"{usable // 4}i", raw[:usable]))
        if not data:
            break
        header += data
    if len(header) < HEADER_LEN or header[:len(MAGIC)] != MAGIC or len(fds) != 2:
        for fd in fds:
            os.close(fd)
        raise ValueError("malformed request")
    size = int.from_bytes(header[len(MAGIC):], "big")
    chunks: list[bytes] = []
    while size > 0:
        chunk = conn.recv(min(size, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
    if size:
        for fd in fds:
            os.close(fd)
        raise ValueError("truncated request")
    cwd, env = decode_request(b"".join(chunks))
    return fds, cwd, env


def _child(conn: socket.socket, fds: list[int], cwd: bytes, env: dict[bytes, bytes]) -> None:
    """In the forked child: become the client's ``generate`` and report the exit code."""
    code = 3
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.alarm(CHILD_TIMEOUT_S)
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        for fd in fds:
            os.close(fd)
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                      errors="backslashreplace", line_buffering=True)
        os.chdir(cwd)
        os.environb.clear()
        os.environb.update(env)
        from . import generate

        code = generate.run(dict(os.environ), how="warm server")
    except BaseException as exc:  # same contract as the CLI entry: exit 3, no traceback
        if os.environ.get("DYN_GITOPS_DEBUG"):
            import traceback

            traceback.print_exc()
        sys.stderr.write(f"dyn-gitops: internal error: {type(exc).__name__}: {exc} "
                         "(set DYN_GITOPS_DEBUG=1 for a traceback; please report it)\n")
        code = 3
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:
            code = 3
        try:
            conn.sendall(b"%d" % code)
        finally:
            os._exit(0)


def _peer_uid(conn: socket.socket) -> int:
    raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", raw)[1])


def _reap(children: set[int], block: bool = False) -> None:
    while children:
        try:
            pid, _ = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            children.clear()
            return
        if pid == 0:
            return
        children.discard(pid)
        block = False


def _prepare_dir(directory: str) -> None:
    os.makedirs(directory, mode=0o700, exist_ok=True)
    st = os.lstat(directory)
    if not (os.path.isdir(directory) and not os.path.islink(directory)
            and st.st_uid == os.getuid() and st.st_mode & 0o077 == 0):
        raise PermissionError(f"{directory} is not a private directory of uid {os.getuid()}; "
                              "refusing to serve there")


def serve(path: str, *, idle_timeout: float = 0.0) -> int:
    """Serve until told to stop; return the process exit code."""
    directory = os.path.dirname(path)
    try:
        _prepare_dir(directory)
    except OSError as exc:
        _log(str(exc))
        return 2
    lock = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return 0  # another server has it
        raise
    _warm_up()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    tmp_path = f"{path}.{os.getpid()}"
    if os.path.exists(tmp_path):
        os.unlink(tmp_path)
    listener.bind(tmp_path)
    listener.listen(64)
    os.replace(tmp_path, path)  # atomic: clients never see a half-made socket
    bound = os.stat(path).st_ino
    Path(path + ".pid").write_text(f"{os.getpid()}\n")
    listener.settimeout(1.0)
    stop = False

    def on_term(_sig: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    _log(f"listening on {path}")
    children: set[int] = set()
    last = time.monotonic()
    while not stop:
        _reap(children)
        try:
            if os.stat(path).st_ino != bound:
                break
        except FileNotFoundError:
            break
        if idle_timeout and time.monotonic() - last > idle_timeout and not children:
            break
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        except InterruptedError:
            continue
        last = time.monotonic()
        with conn:
            conn.settimeout(10.0)
            try:
                if _peer_uid(conn) != os.getuid():
                    continue
                fds, cwd, env = _recv_request(conn)
            except (OSError, ValueError) as exc:
                _log(f"bad request: {exc}")
                continue
            if len(children) >= MAX_CHILDREN:
                _reap(children, block=True)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                listener.close()
                conn.settimeout(None)
                _child(conn, fds, cwd, env)
            for fd in fds:
                os.close(fd)
            children.add(pid)
    listener.close()
    for leftover in (path, path + ".pid"):
        try:
            if leftover != path or os.stat(path).st_ino == bound:
                os.unlink(leftover)
        except OSError:
            pass
    _log("stopped")
    return 0


def main() -> None:
    """Entry for the detached server started by :func:`.client.start_server`."""
    args = sys.argv[1:]
    if len(args) != 1:
        sys.stderr.write("usage: python -c 'from dyn_gitops.argocd.server import main; main()' "
                         "SOCKET\n")
        sys.exit(2)
    try:  # detached: stderr is /dev/null, so keep a short log beside the socket
        _prepare_dir(os.path.dirname(args[0]))
        log = os.open(args[0] + ".log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(log, 2)
        os.close(log)
    except OSError:
        pass
    sys.exit(serve(args[0]))
