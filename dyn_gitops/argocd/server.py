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

It depends on no working directory: Argo CD deletes the application directory it was
started from right after that ``generate``, so the server moves to ``/`` before anything
else and each child moves to its own request's directory. Nothing is imported from a
working directory either (relative ``sys.path`` entries are dropped), since that is a
repository's content. Requests are read without blocking, all in one loop: a client that
connects and sends nothing, or half a request, holds only its own connection, which is
dropped after :data:`REQUEST_TIMEOUT_S`, while other requests are served.
"""

from __future__ import annotations

import errno
import fcntl
import gc
import io
import os
import selectors
import signal
import socket
import struct
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .client import HEADER_LEN, MAGIC, decode_request

CHILD_TIMEOUT_S = 300  # a render takes seconds; Argo CD gives up long before this
MAX_CHILDREN = max(2, (os.cpu_count() or 1) * 2)
REQUEST_TIMEOUT_S = 10.0  # a client sends its whole request at once; a stuck one is dropped
MAX_PENDING = 128  # connections still sending their request; more are refused meanwhile
MAX_REQUEST_BYTES = 16 * 1024 * 1024  # working directory + environment
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
    from ..settings import prebuild_validators
    from . import generate

    prebuild_validators()
    with tempfile.TemporaryDirectory(prefix="dyn-gitops-warmup-") as tmp:
        Path(tmp, "graph.yaml").write_text(_WARMUP_DGD)
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
            os.chdir("/")
    gc.collect()
    gc.freeze()  # keep the warm heap shared with the children (copy-on-write)


@dataclass
class _Pending:
    """A connection whose request is still arriving (read without blocking)."""

    conn: socket.socket
    deadline: float
    header: bytes = b""
    fds: list[int] = field(default_factory=list)
    body: bytearray = field(default_factory=bytearray)
    size: int = -1  # payload length, once the header is complete

    def feed(self) -> bool:
        """Read what is there; True once the request is complete. ValueError: malformed."""
        try:
            if self.size < 0:
                self._read_header()
            if self.size >= 0:
                while len(self.body) < self.size:
                    chunk = self.conn.recv(min(self.size - len(self.body), 1 << 20))
                    if not chunk:
                        raise ValueError("truncated request")
                    self.body += chunk
        except BlockingIOError:
            return False
        return self.size >= 0 and len(self.body) >= self.size

    def _read_header(self) -> None:
        while len(self.header) < HEADER_LEN:
            data, ancdata, _flags, _addr = self.conn.recvmsg(
                HEADER_LEN - len(self.header), socket.CMSG_SPACE(2 * 4)
            )
            for level, kind, raw in ancdata:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    usable = len(raw) - len(raw) % 4
                    self.fds.extend(struct.unpack(f"{usable // 4}i", raw[:usable]))
            if not data:
                raise ValueError("closed before the request was complete")
            self.header += data
        if self.header[: len(MAGIC)] != MAGIC or len(self.fds) != 2:
            raise ValueError("malformed request")
        size = int.from_bytes(self.header[len(MAGIC) :], "big")
        if size > MAX_REQUEST_BYTES:
            raise ValueError(f"request of {size} bytes, over {MAX_REQUEST_BYTES}")
        self.size = size

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []
        self.conn.close()


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
        sys.stderr = io.TextIOWrapper(
            io.FileIO(2, "w", closefd=False),
            encoding="utf-8",
            errors="backslashreplace",
            line_buffering=True,
        )
        os.chdir(cwd)
        os.environb.clear()
        os.environb.update(env)
        from . import generate

        code = generate.run(dict(os.environ), how="warm server")
    except BaseException as exc:  # same contract as the CLI entry: exit 3, no traceback
        if os.environ.get("DYN_GITOPS_DEBUG"):
            import traceback

            traceback.print_exc()
        from ..display import printable

        sys.stderr.write(
            printable(f"dyn-gitops: internal error: {type(exc).__name__}: {exc} ")
            + "(set DYN_GITOPS_DEBUG=1 for a traceback; please report it)\n"
        )
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


def _no_relative_imports() -> None:
    """Import only from absolute paths: ``-c`` puts "" (the working directory) first, and
    a request's working directory holds a repository's files."""
    sys.path[:] = [p for p in sys.path if p and os.path.isabs(p)]


def _prepare_dir(directory: str) -> None:
    os.makedirs(directory, mode=0o700, exist_ok=True)
    st = os.lstat(directory)
    if not (
        os.path.isdir(directory)
        and not os.path.islink(directory)
        and st.st_uid == os.getuid()
        and st.st_mode & 0o077 == 0
    ):
        raise PermissionError(
            f"{directory} is not a private directory of uid {os.getuid()}; refusing to serve there"
        )


def serve(path: str, *, idle_timeout: float = 0.0) -> int:
    """Serve until told to stop; return the process exit code."""
    gc.enable()  # `cmp serve`: paused by the console script (oneshot.py); a server lives on
    path = os.path.abspath(path)
    os.chdir("/")  # the start directory may be deleted at any time (Argo CD does)
    _no_relative_imports()
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
    listener.setblocking(False)
    stop = False

    def on_term(_sig: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    _log(f"listening on {path}")
    loop = _Loop(listener)
    last = time.monotonic()
    while not stop:
        _reap(loop.children)
        try:
            if os.stat(path).st_ino != bound:
                break
        except FileNotFoundError:
            break
        if (
            idle_timeout
            and time.monotonic() - last > idle_timeout
            and not loop.children
            and not loop.pending
            and not loop.ready
        ):
            break
        if loop.step():
            last = time.monotonic()
    loop.close()
    for leftover in (path, path + ".pid"):
        try:
            if leftover != path or os.stat(path).st_ino == bound:
                os.unlink(leftover)
        except OSError:
            pass
    _log("stopped")
    return 0


class _Loop:
    """Accept connections, read their requests without blocking, fork one child each."""

    def __init__(self, listener: socket.socket) -> None:
        self.listener = listener
        self.selector = selectors.DefaultSelector()
        self.selector.register(listener, selectors.EVENT_READ)
        self.pending: dict[int, _Pending] = {}
        self.ready: list[_Pending] = []  # complete, waiting for a free child slot
        self.children: set[int] = set()

    def step(self) -> bool:
        """One turn of the loop (at most about a second); True if a request was started."""
        now = time.monotonic()
        timeout = (
            0.05
            if self.ready
            else min([1.0, *(max(0.0, p.deadline - now) for p in self.pending.values())])
        )
        for key, _events in self.selector.select(timeout):
            if key.fileobj is self.listener:
                self._accept()
            else:
                self._read(self.pending[key.fd])
        now = time.monotonic()
        for p in [p for p in self.pending.values() if p.deadline <= now]:
            _log(f"dropped a client that sent no complete request within {REQUEST_TIMEOUT_S:g}s")
            self._drop(p)
        started = False
        while self.ready and len(self.children) < MAX_CHILDREN:
            self._spawn(self.ready.pop(0))
            started = True
        return started

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            try:
                if _peer_uid(conn) != os.getuid():
                    conn.close()
                    continue
            except OSError:
                conn.close()
                continue
            if len(self.pending) >= MAX_PENDING:
                _log(f"{MAX_PENDING} requests still arriving; refused one more")
                conn.close()
                continue
            conn.setblocking(False)
            p = _Pending(conn, time.monotonic() + REQUEST_TIMEOUT_S)
            self.pending[conn.fileno()] = p
            self.selector.register(conn, selectors.EVENT_READ)

    def _read(self, p: _Pending) -> None:
        try:
            done = p.feed()
        except (OSError, ValueError) as exc:
            _log(f"bad request: {exc}")
            self._drop(p)
            return
        if done:
            self.selector.unregister(p.conn)
            del self.pending[p.conn.fileno()]
            self.ready.append(p)

    def _drop(self, p: _Pending) -> None:
        self.selector.unregister(p.conn)
        del self.pending[p.conn.fileno()]
        p.close()

    def _spawn(self, p: _Pending) -> None:
        cwd, env = decode_request(bytes(p.body))
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            pid = os.fork()
        except OSError as exc:  # out of processes or memory: this request fails, not the server
            _log(f"cannot fork for a request: {exc}")
            p.close()
            return
        if pid == 0:
            fds, p.fds = p.fds, []
            conn = p.conn
            self._close_all(keep=conn)
            conn.setblocking(True)
            _child(conn, fds, cwd, env)
        p.close()
        self.children.add(pid)

    def _close_all(self, keep: socket.socket | None = None) -> None:
        """Everything but ``keep``: the listener and every other client's connection."""
        self.selector.close()
        self.listener.close()
        for other in [*self.pending.values(), *self.ready]:
            if other.conn is not keep:
                other.close()

    def close(self) -> None:
        self._close_all()


def main() -> None:
    """Entry for the detached server started by :func:`.client.start_server`."""
    args = sys.argv[1:]
    if len(args) != 1:
        sys.stderr.write(
            "usage: python -c 'from dyn_gitops.argocd.server import main; main()' SOCKET\n"
        )
        sys.exit(2)
    _no_relative_imports()
    try:  # detached: stderr is /dev/null, so keep a short log beside the socket
        _prepare_dir(os.path.dirname(args[0]))
        log = os.open(args[0] + ".log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(log, 2)
        os.close(log)
    except OSError:
        pass
    sys.exit(serve(args[0]))
