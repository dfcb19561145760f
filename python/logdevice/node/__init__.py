"""The node process (``logdeviced``): one asyncio loop serving the roles of one node.

- ``transport/``: how messages come and go: ``server`` (``Node``: the loop, the TCP
  server, dispatch), ``connection`` (one framed connection), ``links`` (node-to-node
  links and the loopback), ``access``, ``request_gate`` and ``limits`` (who may ask what,
  and how much a peer may hold);
- ``roles/``: what a node does with them, one ``*_role`` module per role, with the glue
  each role needs beside it (see that package);
- ``assemble``: which roles a node runs; ``main``: the ``logdeviced`` command;
  ``store_identity`` and ``shard_check``: checks at start-up.
"""

from logdevice.node.roles.role import Peer, Role

__all__ = ["Role", "Peer"]
