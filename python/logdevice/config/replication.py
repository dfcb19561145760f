"""The replication property of a log: how many copies, across which failure domains.

Written in a config as an int ``R`` (R copies on R distinct nodes) or a dict scope ->
copies, e.g. ``{"rack": 2, "node": 3}``: three copies, spread over at least two racks.
Requirements are kept biggest scope first and always end with the NODE scope, whose count
is the replication factor (``{"rack": 3}`` means ``{"rack": 3, "node": 3}``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from logdevice.config._fields import FieldError, check_int, join, type_name
from logdevice.config.location import NodeLocationScope

#: Most copies a record may have (LogDevice's copyset size limit).
MAX_REPLICATION = 127


@dataclass(frozen=True, slots=True)
class ReplicationProperty:
    """Per-scope copy requirements, biggest scope first, ending with NODE.

    Build one with ``ReplicationProperty.parse(2)`` or ``.parse({"rack": 2, "node": 3})``.
    """

    requirements: tuple[tuple[NodeLocationScope, int], ...]

    def __post_init__(self) -> None:
        reqs = self.requirements
        if not reqs or reqs[-1][0] != NodeLocationScope.NODE:
            raise ValueError("requirements must end with the NODE scope")
        if any(a[0] <= b[0] or a[1] > b[1] for a, b in zip(reqs, reqs[1:], strict=False)):
            raise ValueError(f"requirements must go from bigger to smaller scopes with "
                             f"non-decreasing copies: {reqs}")

    @classmethod
    def parse(cls, value: Any, path: str = "") -> ReplicationProperty:
        """From the config form (an int or a dict scope name -> copies).

        Raises ``FieldError`` (a ``ValueError``) whose ``path`` names the bad part, e.g.
        ``replication.rack``, relative to ``path``.
        """
        if isinstance(value, ReplicationProperty):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            r = check_int(value, path, 1, MAX_REPLICATION)
            return cls(((NodeLocationScope.NODE, r),))
        if not isinstance(value, Mapping):
            raise FieldError(path, f"expected an integer or an object like "
                                   f'{{"rack": 2, "node": 3}}, got {type_name(value)}')
        if not value:
            raise FieldError(path, "must name at least one scope")
        counts: dict[NodeLocationScope, int] = {}
        for name, copies in value.items():
            try:
                scope = NodeLocationScope.from_config_name(name)
            except (KeyError, TypeError):
                raise FieldError(join(path, str(name)), "unknown scope (scopes: node, rack, "
                                 "row, cluster, dc, region)") from None
            counts[scope] = check_int(copies, join(path, name), 1, MAX_REPLICATION)
        factor = max(counts.values())
        if NodeLocationScope.NODE in counts and counts[NodeLocationScope.NODE] < factor:
            big = max(counts, key=lambda s: (counts[s], s))
            raise FieldError(join(path, big.config_name),
                             f"{counts[big]} copies across {big.config_name}s need at least "
                             f"{counts[big]} copies in total, but node is "
                             f"{counts[NodeLocationScope.NODE]}")
        counts.setdefault(NodeLocationScope.NODE, factor)
        ordered = sorted(counts.items(), key=lambda kv: -kv[0])
        for (big, n_big), (small, n_small) in zip(ordered, ordered[1:], strict=False):
            if n_big > n_small:
                raise FieldError(join(path, big.config_name),
                                 f"{n_big} copies across {big.config_name}s cannot fit in "
                                 f"{n_small} copies across {small.config_name}s")
        return cls(tuple(ordered))

    @property
    def replication_factor(self) -> int:
        """Copies of each record (the NODE requirement, which is the largest)."""
        return self.requirements[-1][1]

    @property
    def biggest_scope(self) -> NodeLocationScope:
        """The biggest scope records are spread across (NODE for a plain int R)."""
        return self.requirements[0][0]

    def copies(self, scope: NodeLocationScope) -> int:
        """Distinct ``scope`` domains a copyset must touch: the requirement at ``scope``,
        else the one at the next bigger listed scope, else 1."""
        best = 1
        for s, n in self.requirements:  # biggest first: the last one at or above wins
            if s >= scope:
                best = n
        return best

    def to_dict(self) -> dict[str, int]:
        """Scope name -> copies, biggest scope first (also the epoch store's form)."""
        return {scope.config_name: n for scope, n in self.requirements}

    def to_config(self) -> int | dict[str, int]:
        """The shortest config form: a plain int when only nodes matter."""
        if len(self.requirements) == 1:
            return self.replication_factor
        return self.to_dict()

    def __str__(self) -> str:
        return "{" + ", ".join(f"{s.config_name}: {n}" for s, n in self.requirements) + "}"
