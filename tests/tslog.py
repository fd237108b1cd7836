"""The records of a trainshim event log (docs/log-format.md), for the tests
that check a log's contents beside what `trainshim report` makes of it."""
import struct

HEADER_BYTES = 24  # len u32, type u16, flags u16, tid u32, check u32, time u64


def records(path):
    """[(type, record bytes, header included)] in file order, up to the first
    record that is not whole (shorter than a header, not a multiple of 8
    bytes, or past the end: a cut log)."""
    data = open(path, "rb").read()
    assert data[:8] == b"TSHMLOG\n", f"{path}: not a trainshim log"
    off, out = 16, []
    while off + HEADER_BYTES <= len(data):
        ln, typ = struct.unpack_from("<IH", data, off)
        if ln < HEADER_BYTES or ln % 8 or off + ln > len(data):
            break
        out.append((typ, data[off:off + ln]))
        off += ln
    return out


def time_ns(rec):
    """A record's time (CLOCK_MONOTONIC ns)."""
    return struct.unpack_from("<Q", rec, 16)[0]
