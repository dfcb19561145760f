"""Configs for local clusters (``LocalCluster``, ``ld-dev-cluster``, tests).

The caller picks the ports (so it can bind-test them); this module only lays them out.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from logdevice.config.cluster import Config


def id_ranges(log_ids: Iterable[int]) -> list[tuple[int, int]]:
    """Collapse log ids into sorted inclusive ranges: ``[1, 2, 3, 7] -> [(1, 3), (7, 7)]``."""
    if isinstance(log_ids, range) and log_ids.step == 1:
        return [(log_ids.start, log_ids.stop - 1)] if len(log_ids) else []
    out: list[tuple[int, int]] = []
    for i in sorted(set(log_ids)):
        if out and i == out[-1][1] + 1:
            out[-1] = (out[-1][0], i)
        else:
            out.append((i, i))
    return out


def make_local_config(
    n_nodes: int,
    replication: int | Mapping[str, int] = 2,
    logs: Iterable[int] = range(1, 101),
    *,
    root: str | os.PathLike[str],
    ports: Sequence[int],
    admin_ports: Sequence[int] | None = None,
    cluster: str = "local",
    host: str | Sequence[str] = "127.0.0.1",
    roles: Sequence[Sequence[str]] | None = None,
    locations: Sequence[str] | None = None,
    weights: Sequence[Mapping[str, float]] | None = None,
    log_attrs: Mapping[str, Any] | None = None,
    settings: Mapping[str, Any] | None = None,
    epoch_store: str | None = None,
    data_dir: str | None = None,
    security: Mapping[str, Any] | None = None,
) -> Config:
    """A validated config for ``n_nodes`` nodes on ``host`` with data under ``root``.

    Parameters
    ----------
    n_nodes : int
        Nodes N0 .. N{n-1}; every node is sequencer and storage unless ``roles`` says.
    replication : int or dict
        The replication property of every log group (``2``, ``{"rack": 2, "node": 3}``).
    logs : iterable of int
        Log ids to provision; contiguous ids become one log group.
    root : path
        Data goes to ``<root>/data/N<i>``, the epoch store to ``<root>/epochs.sqlite``.
    host : str or sequence of str
        The address every node listens on, or one address per node.
    ports, admin_ports : sequence of int
        One data port (and optionally one admin port) per node, chosen by the caller.
    roles, locations, weights : per-node sequences, optional
        Override each node's roles, location string and weights dict.
    log_attrs : dict, optional
        Extra log group attributes (``sticky_copysets``, ``max_writes_in_flight``...).
    settings : dict, optional
        Tunables for the ``settings`` section.
    epoch_store : str, optional
        Epoch store URI; default ``file:<root>/epochs.sqlite``.
    data_dir : str, optional
        The config's ``data_dir`` as written (relative paths are taken from the directory
        the config is loaded from); default ``<root>/data``.
    security : dict, optional
        The ``security`` section as JSON (TLS, principals, ACLs); default none.

    The config's ``base_dir`` is ``root``: dump it to ``<root>/cluster.json``.
    """
    root = Path(root).resolve()
    hosts = [host] * n_nodes if isinstance(host, str) else list(host)
    for name, seq in (("hosts", hosts), ("ports", ports), ("admin_ports", admin_ports),
                      ("roles", roles), ("locations", locations), ("weights", weights)):
        if seq is not None and len(seq) != n_nodes:
            raise ValueError(f"{name} has {len(seq)} entries for {n_nodes} nodes")
    nodes = []
    for i in range(n_nodes):
        node: dict[str, Any] = {"index": i, "host": hosts[i], "port": int(ports[i])}
        if admin_ports is not None:
            node["admin_port"] = int(admin_ports[i])
        node["location"] = locations[i] if locations is not None else ""
        node["roles"] = list(roles[i]) if roles is not None else ["sequencer", "storage"]
        if weights is not None:
            node["weights"] = dict(weights[i])
        nodes.append(node)
    rep = replication if isinstance(replication, int) else dict(replication)
    groups = [
        {"name": f"logs_{lo}_{hi}" if lo != hi else f"log_{lo}", "id": [lo, hi],
         "replication": rep, **(log_attrs or {})}
        for lo, hi in id_ranges(logs)
    ]
    d: dict[str, Any] = {
        "cluster": cluster,
        "nodes": nodes,
        "logs": groups,
        "epoch_store": epoch_store or f"file:{root / 'epochs.sqlite'}",
        "data_dir": data_dir if data_dir is not None else str(root / "data"),
    }
    if settings:
        d["settings"] = dict(settings)
    if security is not None:
        d["security"] = dict(security)
    return Config.from_dict(d, source=root / "cluster.json", base_dir=root)
