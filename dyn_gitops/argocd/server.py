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

Everything it holds is bounded (the limits are in :mod:`dyn_gitops.settings`): children,
connections still sending, and complete requests waiting for a child (:data:`MAX_QUEUED`).
A request beyond a bound is answered :data:`~.client.BUSY` (its client renders in-process).
Out of file descriptors (``EMFILE``/``ENFILE`` from ``accept``), the server stops accepting
for a while (logged once, retried with a growing pause) and keeps serving the connections it
holds; new clients wait in the listen backlog until descriptors are free again.
"""

from __future__ import annotations

import contextlib
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

from .. import settings
from .client import BUSY, HEADER_LEN, MAGIC, decode_request

# read at run time (module globals), so a test can lower them in a server process
CHILD_TIMEOUT_S = settings.WARM_SERVER_CHILD_TIMEOUT_S
MAX_CHILDREN = settings.WARM_SERVER_MAX_CHILDREN
MAX_QUEUED = settings.WARM_SERVER_MAX_QUEUED
REQUEST_TIMEOUT_S = settings.WARM_SERVER_REQUEST_TIMEOUT_S
MAX_PENDING = settings.WARM_SERVER_MAX_PENDING
MAX_REQUEST_BYTES = settings.WARM_SERVER_MAX_REQUEST_BYTES
ACCEPT_BACKOFF_S = settings.WARM_SERVER_ACCEPT_BACKOFF_S
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


class _Busy(Exception):
    """The request cannot be taken now (no descriptor for its file descriptors)."""


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
            data, ancdata, flags, _addr = self.conn.recvmsg(
                HEADER_LEN - len(self.header), socket.CMSG_SPACE(2 * 4)
            )
            for level, kind, raw in ancdata:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    usable = len(raw) - len(raw) % 4
                    self.fds.extend(struct.unpack(f"{usable // 4}i", raw[:usable]))
            if flags & socket.MSG_CTRUNC and len(self.fds) < 2:  # no descriptor free
                raise _Busy("no file descriptor free for the request's stdout and stderr")
            if not data:
                raise ValueError("closed before the request was complete")
            self.header += data
        if self.header[: len(MAGIC)] != MAGIC or len(self.fds) != 2:
            raise ValueError("malformed request")
        size = int.from_bytes(self.header[len(MAGIC) :], "big")
        if size > MAX_REQUEST_BYTES:
            raise ValueError(f"request of {size} bytes, over {MAX_REQUEST_BYTES}")
        self.size = size

    def close(self, *, busy: bool = False) -> None:
        """Close the connection (first answering it busy) and the descriptors it passed."""
        for fd in self.fds:
            os.close(fd)
        self.fds = []
        if busy:
            _answer_busy(self.conn)
        else:
            self.conn.close()


def _answer_busy(conn: socket.socket) -> None:
    """Tell the client to render by itself (nothing was written to its stdout), and close."""
    with contextlib.suppress(OSError):  # it went away: nothing to tell
        conn.send(BUSY)
    conn.close()


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
        from ..display import internal_error

        sys.stderr.write(internal_error(exc) + "\n")
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
    try:
        _prepare_dir(os.path.dirname(path))
    except OSError as exc:
        _log(str(exc))
        return 2
    if not _lock(path):
        return 0  # another server has it
    _warm_up()
    listener, bound = _listen(path)
    stop = _Stop()
    _log(f"listening on {path}")
    loop = _Loop(listener)
    _run(loop, path, bound, idle_timeout, stop)
    loop.close()
    _remove(path, bound)
    _log("stopped")
    return 0


def _lock(path: str) -> bool:
    """One server per socket: False when another holds the lock (kept open until exit)."""
    lock = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            os.close(lock)
            return False
        raise
    return True


def _listen(path: str) -> tuple[socket.socket, int]:
    """The listening socket, put in place atomically; with the inode it was bound to."""
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
    return listener, bound


class _Stop:
    """Set by SIGTERM or SIGINT; the loop ends at its next turn."""

    def __init__(self) -> None:
        self.requested = False
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, _sig: int, _frame: object) -> None:
        self.requested = True


def _ours(path: str, bound: int) -> bool:
    """Whether ``path`` is still our socket (removed or replaced: time to go)."""
    try:
        return os.stat(path).st_ino == bound
    except FileNotFoundError:
        return False


def _run(loop: _Loop, path: str, bound: int, idle_timeout: float, stop: _Stop) -> None:
    last = time.monotonic()
    while not stop.requested:
        _reap(loop.children)
        if not _ours(path, bound):
            break
        if idle_timeout and time.monotonic() - last > idle_timeout and loop.idle():
            break
        if loop.step():
            last = time.monotonic()


def _remove(path: str, bound: int) -> None:
    """The pid file, and the socket if it is still ours."""
    for leftover in (path, path + ".pid"):
        try:
            if leftover != path or os.stat(path).st_ino == bound:
                os.unlink(leftover)
        except OSError:
            pass


class _Loop:
    """Accept connections, read their requests without blocking, fork one child each."""

    def __init__(self, listener: socket.socket) -> None:
        self.listener = listener
        self.selector = selectors.DefaultSelector()
        self.selector.register(listener, selectors.EVENT_READ)
        self.pending: dict[int, _Pending] = {}
        self.ready: list[_Pending] = []  # complete, waiting for a free child slot
        self.children: set[int] = set()
        self.paused_until: float | None = None  # accept paused (out of descriptors)
        self.backoff = ACCEPT_BACKOFF_S[0]

    def idle(self) -> bool:
        return not self.children and not self.pending and not self.ready

    def step(self) -> bool:
        """One turn of the loop (at most about a second); True if a request was started."""
        now = time.monotonic()
        waits = [1.0, *(max(0.0, p.deadline - now) for p in self.pending.values())]
        if self.paused_until is not None:
            waits.append(max(0.0, self.paused_until - now))
        timeout = 0.05 if self.ready else min(waits)
        for key, _events in self.selector.select(timeout):
            if key.fileobj is self.listener:
                self._accept()
            else:
                self._read(self.pending[key.fd])
        now = time.monotonic()
        if self.paused_until is not None and now >= self.paused_until:
            self.paused_until = None
            self.selector.register(self.listener, selectors.EVENT_READ)
        for p in [p for p in self.pending.values() if p.deadline <= now]:
            _log(f"dropped a client that sent no complete request within {REQUEST_TIMEOUT_S:g}s")
            self._drop(p)
        started = False
        while self.ready and len(self.children) < MAX_CHILDREN:
            self._spawn(self.ready.pop(0))
            started = True
        return started

    def _accept(self) -> None:
        while self.paused_until is None:
            try:
                conn, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as exc:  # EMFILE, ENFILE (or ENOBUFS, ENOMEM): never the end
                self._pause_accepting(exc)
                return
            if self.backoff != ACCEPT_BACKOFF_S[0]:
                _log("accepting connections again")
                self.backoff = ACCEPT_BACKOFF_S[0]
            self._take(conn)

    def _pause_accepting(self, exc: OSError) -> None:
        """Stop accepting for a while, serving what is held; logged once per episode."""
        if self.backoff == ACCEPT_BACKOFF_S[0]:
            name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
            _log(
                f"cannot accept a connection ({name}: {exc.strerror}); serving the "
                "connections held, retrying with a growing pause"
            )
        self.selector.unregister(self.listener)
        self.paused_until = time.monotonic() + self.backoff
        self.backoff = min(self.backoff * 2, ACCEPT_BACKOFF_S[1])

    def _take(self, conn: socket.socket) -> None:
        """A new connection: only our own user's, and only while under the bound."""
        try:
            if _peer_uid(conn) != os.getuid():
                conn.close()
                return
        except OSError:
            conn.close()
            return
        if len(self.pending) >= MAX_PENDING:
            _log(f"{MAX_PENDING} requests still arriving; answered one more busy")
            _answer_busy(conn)
            return
        conn.setblocking(False)
        p = _Pending(conn, time.monotonic() + REQUEST_TIMEOUT_S)
        self.pending[conn.fileno()] = p
        self.selector.register(conn, selectors.EVENT_READ)

    def _read(self, p: _Pending) -> None:
        try:
            done = p.feed()
        except _Busy as exc:
            _log(f"answered a request busy: {exc}")
            self._drop(p, busy=True)
            return
        except (OSError, ValueError) as exc:
            _log(f"bad request: {exc}")
            self._drop(p)
            return
        if not done:
            return
        self.selector.unregister(p.conn)
        del self.pending[p.conn.fileno()]
        free = max(0, MAX_CHILDREN - len(self.children))
        if len(self.ready) >= MAX_QUEUED + free:
            _log(f"{MAX_QUEUED} requests already wait for a render; answered one more busy")
            p.close(busy=True)
            return
        self.ready.append(p)

    def _drop(self, p: _Pending, *, busy: bool = False) -> None:
        self.selector.unregister(p.conn)
        del self.pending[p.conn.fileno()]
        p.close(busy=busy)

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
