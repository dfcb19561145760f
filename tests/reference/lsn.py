"""Plain-Python reference for ldcore.lsn."""

LSN_MAX = 2**64 - 1


def compose(epoch: int, esn: int) -> int:
    return (epoch << 32) | esn


def epoch_of(lsn: int) -> int:
    return lsn >> 32


def esn_of(lsn: int) -> int:
    return lsn & 0xFFFFFFFF


def to_string(lsn: int) -> str:
    if lsn == 0:
        return "LSN_INVALID"
    if lsn == LSN_MAX:
        return "LSN_MAX"
    return f"e{epoch_of(lsn)}n{esn_of(lsn)}"
