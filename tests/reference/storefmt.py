"""Plain-Python LogsDB record formats (one record at a time, ``struct``): the reference for
``ldcore.storefmt``.  Layout: ``logdevice.storage.keys``."""

import struct

from tests.reference.checksum import crc32c

LSN_MAX = 2**64 - 1


def _copyset(row) -> list[int]:
    return [int(v) for v in row if int(v) >= 0]


def encode_data(log_id, lsns, timestamps, flags, waves, copysets, payloads, offsets,
                max_payload=-1):
    """(keys, heads, head_offsets) as bytes, bytes, list; ValueError for bad input,
    ``OverflowError`` (standing for TOOBIG) for a payload above ``max_payload``."""
    n = len(lsns)
    if not (len(timestamps) == len(flags) == len(waves) == len(copysets) == n):
        raise ValueError("lengths differ")
    if len(offsets) != n + 1:
        raise ValueError("offsets")
    lsns = [int(x) for x in lsns]
    if n and (lsns[0] == 0 or lsns[-1] == LSN_MAX):
        raise ValueError("lsn range")
    if any(b <= a for a, b in zip(lsns, lsns[1:], strict=False)):
        raise ValueError("lsns not increasing")
    offs = [int(o) for o in offsets]
    buf = bytes(payloads)
    if any(b < a for a, b in zip(offs, offs[1:], strict=False)) or offs[-1] > len(buf):
        raise ValueError("offsets")
    if max_payload >= 0 and any(b - a > max_payload for a, b in zip(offs, offs[1:],
                                                                      strict=False)):
        raise OverflowError("too big")
    keys, heads, head_offsets = b"", b"", [0]
    for i in range(n):
        keys += b"d" + struct.pack(">QQ", log_id, lsns[i])
        cs = _copyset(copysets[i])
        crc = crc32c(buf[offs[i]:offs[i + 1]])
        head = struct.pack("<HBBqIII", 24 + 2 * len(cs), 1, len(cs), int(timestamps[i]),
                           int(flags[i]), int(waves[i]), crc)
        head += struct.pack(f"<{len(cs)}H", *cs)
        heads += head
        head_offsets.append(len(heads))
    return keys, heads, head_offsets


def encode_csi(log_id, lsns, flags, copysets):
    """(keys, values, value_offsets) of single CSI entries."""
    keys, values, offsets = b"", b"", [0]
    for lsn, flag, row in zip(lsns, flags, copysets, strict=True):
        cs = _copyset(row)
        keys += b"C" + struct.pack(">QQB", log_id, int(lsn), 0)
        values += struct.pack("<IB", int(flag), len(cs)) + struct.pack(f"<{len(cs)}H", *cs)
        offsets.append(len(values))
    return keys, values, offsets


def encode_run(log_id, lsns, timestamps, flags, waves, copysets, payloads, offsets,
               grouped=False):
    """Every (key, value) a run of records writes, in order: data entries, then the
    copyset index (single entries, or one block or run entry when ``grouped`` and there
    are several records).  ``waves`` None: all 1.  Input assumed valid."""
    n = len(lsns)
    waves = [1] * n if waves is None else waves
    keys, heads, hoffs = encode_data(log_id, lsns, timestamps, flags, waves, copysets,
                                     payloads, offsets)
    buf = bytes(payloads)
    entries = [(keys[17 * i:17 * i + 17],
                heads[hoffs[i]:hoffs[i + 1]] + buf[int(offsets[i]):int(offsets[i + 1])])
               for i in range(n)]
    rows = [_copyset(row) for row in copysets]
    lsns = [int(x) for x in lsns]
    flags = [int(f) for f in flags]
    if not grouped or n <= 1:
        ck, cv, co = encode_csi(log_id, lsns, flags, copysets)
        return entries + [(ck[18 * i:18 * i + 18], cv[co[i]:co[i + 1]]) for i in range(n)]
    block = (lsns[-1] - lsns[0] == n - 1 and all(f == flags[0] for f in flags)
             and all(r == rows[0] for r in rows))
    key = b"B" + struct.pack(">QQB", log_id, lsns[0], 1 if block else 2)
    if block:
        value = struct.pack("<QIB", lsns[-1], flags[0], len(rows[0]))
        value += struct.pack(f"<{len(rows[0])}H", *rows[0])
    else:
        width = len(copysets[0])
        value = struct.pack("<QIB", lsns[-1], n, width)
        for lsn, flag, row in zip(lsns, flags, rows, strict=True):
            padded = row + [0] * (width - len(row))
            value += struct.pack(f"<QIB{width}H", lsn, flag, len(row), *padded)
    return entries + [(key, value)]


def plan_entries(plan: bytes, bodies) -> list[tuple[bytes, bytes]]:
    """The (key, value) entries of a put plan (``ldcore.storefmt``'s layout)."""
    buf = bytes(bodies)
    out, at = [], 0
    while at < len(plan):
        klen, vlen, boff, blen = struct.unpack_from("=IIQQ", plan, at)
        at += 24
        key, inline = plan[at:at + klen], plan[at + klen:at + klen + vlen]
        at += klen + vlen
        out.append((key, inline + buf[boff:boff + blen]))
    return out
