"""A node's transport: the loop, connections, links and the checks at the door.

- ``server``: ``Node``, the asyncio loop, the TCP server, the links to the other nodes,
  and the dispatch of every message to the role that owns its type;
- ``connection``: one framed TCP connection (HELLO handshake, back-pressure), both ways;
- ``links``: persistent node-to-node connections with reconnect, and the loopback;
- ``access``: TLS and identities from the config; ``request_gate``: what a peer may ask;
  ``limits``: connections and buffered bytes a peer may hold.
"""
