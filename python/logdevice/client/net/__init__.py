"""How a client reaches the nodes.

- ``loop``: the client's event loop, in one background thread;
- ``connection``: one pipelined connection to one node, with its ``keepalive``;
- ``routing``: the cluster view and which node sequences a log (sans-I/O);
- ``retry``: which failures are retried, and how long to wait.
"""
