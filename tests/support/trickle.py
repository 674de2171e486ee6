"""A model worker that trickles its answer: a real TCP server on loopback that reads each
request and answers it one byte every ``interval`` seconds (a status line, then a header
that never ends), until released. One thread serves every connection (its own thread
count does not grow with the calls it holds).

    with TrickleServer(["127.0.0.1"]) as t:
        ... t.address ...           # http://127.0.0.1:<port>
        t.held                      # connections it is trickling to now
        t.released                  # set once it stopped holding them (``release()``)
"""

from __future__ import annotations

import selectors
import socket
import threading
import time
from types import TracebackType

PREFIX = b"HTTP/1.1 200 OK\r\nX-Trickle: "


class TrickleServer:
    def __init__(self, hosts: list[str], port: int = 0, interval: float = 0.2) -> None:
        self.interval = interval
        self.listeners: list[socket.socket] = []
        for host in hosts:
            sock = socket.create_server((host, port))
            port = port or sock.getsockname()[1]
            sock.setblocking(False)
            self.listeners.append(sock)
        self.port = port
        self.address = f"http://{hosts[0]}:{port}"
        self.release_now = threading.Event()
        #: set when the server stopped holding its connections (released or closed)
        self.released = threading.Event()
        self.accepted = 0
        self._conns: dict[socket.socket, bool] = {}  # -> request seen (trickling)
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="trickle-server", daemon=True)
        self._thread.start()

    @property
    def held(self) -> int:
        with self._lock:
            return sum(1 for trickling in self._conns.values() if trickling)

    def release(self) -> None:
        self.release_now.set()
        self._thread.join(10)

    def __enter__(self) -> TrickleServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    # ------------------------------------------------------------------ the thread
    def _run(self) -> None:
        sel = selectors.DefaultSelector()
        for sock in self.listeners:
            sel.register(sock, selectors.EVENT_READ)
        next_byte = time.monotonic()
        try:
            while not self.release_now.is_set():
                for key, _ in sel.select(timeout=self.interval / 2):
                    self._readable(sel, key.fileobj)  # type: ignore[arg-type]
                if time.monotonic() >= next_byte:
                    next_byte = time.monotonic() + self.interval
                    self._trickle(sel)
        finally:
            with self._lock:
                conns = list(self._conns)
                self._conns.clear()
            for conn in conns:
                conn.close()
            for sock in self.listeners:
                sock.close()
            sel.close()
            self.released.set()

    def _readable(self, sel: selectors.BaseSelector, sock: socket.socket) -> None:
        if sock in self.listeners:
            conn, _ = sock.accept()
            conn.setblocking(False)
            sel.register(conn, selectors.EVENT_READ)
            with self._lock:
                self._conns[conn] = False
                self.accepted += 1
            return
        try:
            data = sock.recv(65536)
        except OSError:
            data = b""
        if not data:  # the client gave up (its deadline): drop the connection
            self._drop(sel, sock)
            return
        with self._lock:
            started = self._conns.get(sock)
            self._conns[sock] = True
        if started is False:
            self._send(sel, sock, PREFIX)

    def _trickle(self, sel: selectors.BaseSelector) -> None:
        with self._lock:
            trickling = [c for c, t in self._conns.items() if t]
        for conn in trickling:
            self._send(sel, conn, b"a")

    def _send(self, sel: selectors.BaseSelector, conn: socket.socket, data: bytes) -> None:
        try:
            conn.send(data)
        except OSError:
            self._drop(sel, conn)

    def _drop(self, sel: selectors.BaseSelector, conn: socket.socket) -> None:
        sel.unregister(conn)
        with self._lock:
            self._conns.pop(conn, None)
        conn.close()


__all__ = ["TrickleServer"]
