"""Node locations and failure-domain scopes.

A location is written ``region.dc.cluster.row.rack`` (five labels, biggest scope first).
Labels may be empty (``"r1.dc1..row1.rack2"`` has no cluster label) and the whole string
may be empty (no location).  The *domain* of a node at a scope is the path of labels down
to that scope, so two racks called ``rack1`` in different rows are different domains.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum

from logdevice.config._fields import FieldError


class NodeLocationScope(IntEnum):
    """Failure-domain scopes, smallest first (LogDevice's numbering)."""

    NODE = 0
    RACK = 1
    ROW = 2
    CLUSTER = 3
    DATA_CENTER = 4
    REGION = 5
    ROOT = 6

    @property
    def config_name(self) -> str:
        """The key used for this scope in the config's replication property."""
        return _CONFIG_NAMES[self]

    @classmethod
    def from_config_name(cls, name: str) -> NodeLocationScope:
        """The scope called ``name`` in a config ("node", "rack", "row", "cluster", "dc",
        "region"); ``KeyError`` for anything else."""
        return _BY_CONFIG_NAME[name]


_CONFIG_NAMES = {
    NodeLocationScope.NODE: "node",
    NodeLocationScope.RACK: "rack",
    NodeLocationScope.ROW: "row",
    NodeLocationScope.CLUSTER: "cluster",
    NodeLocationScope.DATA_CENTER: "dc",
    NodeLocationScope.REGION: "region",
    NodeLocationScope.ROOT: "root",
}
_BY_CONFIG_NAME = {
    name: scope for scope, name in _CONFIG_NAMES.items() if scope != NodeLocationScope.ROOT
}
#: The scopes a location string names, in the order they are written (biggest first).
LOCATION_SCOPES: tuple[NodeLocationScope, ...] = (
    NodeLocationScope.REGION,
    NodeLocationScope.DATA_CENTER,
    NodeLocationScope.CLUSTER,
    NodeLocationScope.ROW,
    NodeLocationScope.RACK,
)
_LABEL = re.compile(r"^[A-Za-z0-9_:\-]*$")


@dataclass(frozen=True, slots=True)
class Location:
    """A parsed ``region.dc.cluster.row.rack`` string; ``labels`` biggest scope first."""

    labels: tuple[str, str, str, str, str] = ("", "", "", "", "")

    @classmethod
    def parse(cls, text: str) -> Location:
        """Parse a location string; ``FieldError`` (a ``ValueError``) when malformed."""
        if not isinstance(text, str):
            raise FieldError("", f"expected a string like 'region.dc.cluster.row.rack', "
                                 f"got {text!r}")
        if text == "":
            return cls()
        parts = text.split(".")
        if len(parts) != len(LOCATION_SCOPES):
            raise FieldError("", f"{text!r} has {len(parts)} labels; a location is "
                                 "'region.dc.cluster.row.rack' (5 labels, empty ones allowed)")
        for scope, label in zip(LOCATION_SCOPES, parts, strict=True):
            if not _LABEL.match(label):
                raise FieldError("", f"{text!r}: the {scope.config_name} label {label!r} may "
                                     "only hold letters, digits, '_', '-' and ':'")
        if not any(parts):
            return cls()
        return cls((parts[0], parts[1], parts[2], parts[3], parts[4]))

    def __str__(self) -> str:
        return "" if self.is_empty else ".".join(self.labels)

    @property
    def is_empty(self) -> bool:
        return not any(self.labels)

    def label(self, scope: NodeLocationScope) -> str:
        """The label at ``scope`` ("" when not given); NODE and ROOT have no label."""
        if scope in (NodeLocationScope.NODE, NodeLocationScope.ROOT):
            return ""
        return self.labels[LOCATION_SCOPES.index(scope)]

    def domain(self, scope: NodeLocationScope) -> str | None:
        """The failure domain at ``scope``: the labels from the region down to ``scope``
        joined with dots, or None when this location has no label at ``scope``.

        ROOT is the one domain every node is in (""); NODE is not a location scope (use the
        node index) and gives None.
        """
        if scope == NodeLocationScope.ROOT:
            return ""
        if scope == NodeLocationScope.NODE:
            return None
        i = LOCATION_SCOPES.index(scope)
        if not self.labels[i]:
            return None
        return ".".join(self.labels[: i + 1])

    def shared_scope(self, other: Location) -> NodeLocationScope:
        """The smallest scope whose domain both locations are in (ROOT when none)."""
        for scope in reversed(LOCATION_SCOPES):  # rack, row, ... region
            d = self.domain(scope)
            if d is not None and d == other.domain(scope):
                return scope
        return NodeLocationScope.ROOT
