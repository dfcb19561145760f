"""Record flag bits stored with every record and CSI entry.

The numbers are LogDevice's and are owned by ``ldcore.scd`` (which filters on them); this
module re-exports them so storage code has one import that works even before that kernel
is built.
"""

try:
    from ldcore.scd import FLAG_BRIDGE, FLAG_DRAINED, FLAG_HOLE, FLAG_WRITTEN_BY_RECOVERY
except ImportError:  # pragma: no cover - kernel not built yet; same numbers as scd.pxd
    FLAG_HOLE = 1 << 6
    FLAG_WRITTEN_BY_RECOVERY = 1 << 13
    FLAG_BRIDGE = 1 << 15
    FLAG_DRAINED = 1 << 19

__all__ = ["FLAG_HOLE", "FLAG_WRITTEN_BY_RECOVERY", "FLAG_BRIDGE", "FLAG_DRAINED"]
