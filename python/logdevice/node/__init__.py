"""The node process (``logdeviced``): one asyncio loop serving the roles of one node.

- ``server``: ``Node`` — TCP server, links to the other nodes, roles, message dispatch;
- ``connection``: one framed TCP connection (HELLO handshake, back-pressure);
- ``links``: persistent node-to-node connections with reconnect, and the loopback;
- ``role``: the ``Role`` base class and the hooks roles get;
- ``failure_detector``: heartbeats and the cluster view;
- ``sequencer_role`` (+ ``store_sender``): APPEND -> LSN -> STOREs -> APPENDED;
- ``storage_role`` (+ ``group_commit``): STORE into LogsDB, RELEASE, per-node queries;
- ``assemble``: which roles a node runs; ``main``: the ``logdeviced`` command;
- ``probe``: a small blocking client for tools and tests (HELLO + request/reply).
"""

from logdevice.node.role import Peer, Role

__all__ = ["Role", "Peer"]
