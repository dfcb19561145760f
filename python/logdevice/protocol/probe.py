"""A small blocking client of one node, for tools and tests (not the user client).

``NodeConnection`` opens a TCP (or TLS) connection, does the HELLO handshake and then sends and
receives single messages, with a timeout on every wait.  ``LocalCluster`` uses it to see
whether nodes are ready; cluster tests use it to talk raw protocol to a node (including
sending garbage on purpose).
"""

from __future__ import annotations

import socket
import time
from collections import deque
from typing import Any

from logdevice.errors import E, TimedOutError, error_for
from logdevice.protocol import (
    ClusterView,
    FrameDecoder,
    GetClusterView,
    Hello,
    HelloReply,
    ProtocolError,
    encode_frame,
)
from logdevice.security import PLAIN, ConnectSecurity


class NodeConnection:
    """A blocking connection to the node at ``address``.

    Parameters
    ----------
    address : (host, port)
    cluster : str
        The cluster name sent in HELLO.
    timeout : float
        Seconds for connecting and for each ``recv``.
    hello : bool
        Do the handshake (raise ``LogDeviceError`` with the node's status if refused).
    role, node_index, store_id : str, int, str
        What the HELLO says about us.
    security : ConnectSecurity, optional
        TLS and the HELLO token (default: plain TCP, no token).  A TLS handshake the node
        refuses raises CONNFAILED.
    """

    def __init__(self, address: tuple[str, int], cluster: str, *, timeout: float = 5.0,
                 hello: bool = True, role: str = "client", node_index: int | None = None,
                 protocol_version: int | None = None, store_id: str = "",
                 security: ConnectSecurity | None = None) -> None:
        self.address = address
        self.timeout = timeout
        security = security if security is not None else PLAIN
        try:
            sock = socket.create_connection(address, timeout=timeout)
        except OSError as exc:
            raise error_for(E.CONNFAILED, f"cannot connect to {address[0]}:{address[1]}: "
                                          f"{exc}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if security.ssl is not None:
            try:
                sock = security.ssl.wrap_socket(sock, server_hostname=address[0])
            except OSError as exc:  # ssl.SSLError among them: a refused certificate
                sock.close()
                raise error_for(E.CONNFAILED, f"TLS handshake with {address[0]}:{address[1]}"
                                              f" failed: {exc}") from None
        self.sock = sock
        self.decoder = FrameDecoder()
        #: Messages received and not yet returned by ``recv``.
        self.inbox: deque[Any] = deque()
        self.hello_reply: HelloReply | None = None
        if hello:
            kw: dict[str, Any] = {"cluster": cluster, "role": role, "node_index": node_index,
                                  "store_id": store_id, "token": security.token}
            if protocol_version is not None:
                kw["protocol_version"] = protocol_version
            try:
                self.send(Hello(**kw))
                reply = self.recv()
            except OSError as exc:  # e.g. TLS 1.3: a refused client certificate shows here
                self.close()
                raise error_for(E.CONNFAILED, f"HELLO to {address[0]}:{address[1]} failed: "
                                              f"{exc}") from None
            except BaseException:
                self.close()
                raise
            if not isinstance(reply, HelloReply):
                self.close()
                raise error_for(E.BADMSG, f"expected HELLO_REPLY, got {type(reply).__name__}")
            self.hello_reply = reply
            if reply.status != E.OK:
                self.close()
                raise error_for(reply.status, reply.message)

    def __enter__(self) -> NodeConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send(self, msg: Any) -> None:
        self.sock.sendall(encode_frame(msg))

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv(self, timeout: float | None = None) -> Any:
        """The next message; TIMEDOUT after ``timeout`` s, PEER_CLOSED if the node closed."""
        if self.inbox:
            return self.inbox.popleft()
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while not self.inbox:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimedOutError(message=f"no message from {self.address} in time")
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(1 << 20)
            except TimeoutError:
                continue
            except OSError as exc:
                raise error_for(E.PEER_CLOSED, f"connection to {self.address}: {exc}") from None
            if not data:
                raise error_for(E.PEER_CLOSED, f"{self.address} closed the connection")
            try:
                self.inbox.extend(self.decoder.feed(data))
            except ProtocolError:
                raise
        return self.inbox.popleft()

    def closed_by_peer(self, timeout: float | None = None) -> bool:
        """Read until the node closes the connection (True) or ``timeout`` (False);
        messages received meanwhile are kept for ``recv``."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(1 << 20)
            except TimeoutError:
                return False
            except OSError:
                return True
            if not data:
                return True
            try:
                self.inbox.extend(self.decoder.feed(data))
            except ProtocolError:
                return True

    def request(self, msg: Any, reply_type: type | None = None,
                timeout: float | None = None) -> Any:
        """Send ``msg`` and return the next reply (of ``reply_type`` when given, skipping
        other messages)."""
        self.send(msg)
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            reply = self.recv(max(0.0, deadline - time.monotonic()))
            if reply_type is None or isinstance(reply, reply_type):
                return reply


def cluster_view(address: tuple[str, int], cluster: str, timeout: float = 2.0,
                 security: ConnectSecurity | None = None) -> ClusterView:
    """Ask one node for its cluster view."""
    with NodeConnection(address, cluster, timeout=timeout, security=security) as conn:
        view: ClusterView = conn.request(GetClusterView(request_id=1), ClusterView)
        return view
