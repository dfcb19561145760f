"""Tests of one part against real sockets, a real ZooKeeper or real node processes, short of
a whole cluster (tests/cluster): what tests/unit, which runs without the network, cannot
cover."""
