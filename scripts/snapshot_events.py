#!/usr/bin/env python3
"""Convert a PyTorch CUDA memory snapshot (torch.cuda.memory._dump_snapshot
pickle) into the compact event stream `trainshim replay` reads.  Plain pickle:
no torch import.

Usage: snapshot_events.py FILE [--level tensor|segment] [--device N]

Output (text, one record a line, integers in decimal):
  R <recorded_peak_reserved> <recorded_peak_allocated> <events> <initial>
  I <addr> <size>     live before the trace began: allocate these first
  A <addr> <size>     alloc (tensor level) / segment_alloc (segment level)
  F <addr>            free_completed / segment_free
  E                   end
The trace is a ring buffer, so blocks allocated before recording started are
missing: a free of an address not allocated in the trace, and an
active_allocated block (tensor level) or a segment (segment level) present at
dump time but never allocated in the trace, were live at the start.  Tensor
sizes are rounded as PyTorch's allocator accounts them (512 bytes).  The
recorded figures are reconstructed as the traces README describes: peak
reserved from the segment events plus the segments live at the start, peak
allocated from the tensor events plus the blocks live at the start."""
import pickle
import sys


def round512(n):
    return 512 if n < 512 else (n + 511) // 512 * 512


def reconstruct(trace, final_items, alloc_action, free_action, size_of):
    """Returns (initial [(addr,size)], events [(op,addr,size)], peak bytes)."""
    live = {}
    initial = {}
    events = []
    for e in trace:
        a = e['action']
        if a == alloc_action:
            live[e['addr']] = size_of(e['size'])
            events.append(('A', e['addr'], size_of(e['size'])))
        elif a == free_action:
            addr = e['addr']
            if addr in live:
                del live[addr]
            elif addr not in initial:
                initial[addr] = size_of(e['size'])
            else:
                continue  # a second free of a pre-trace address: ignore
            events.append(('F', addr, 0))
    for addr, size in final_items:
        if addr not in live and addr not in initial:
            initial[addr] = size
    cur = sum(initial.values())
    peak = cur
    live_now = dict(initial)
    for op, addr, size in events:
        if op == 'A':
            if addr in live_now:       # inconsistent trace: count the newer one
                cur -= live_now[addr]
            live_now[addr] = size
            cur += size
        else:
            cur -= live_now.pop(addr, 0)
        peak = max(peak, cur)
    return sorted(initial.items()), events, peak


def main(argv):
    level, device, path = 'tensor', 0, None
    i = 1
    while i < len(argv):
        if argv[i] == '--level' and i + 1 < len(argv):
            level = argv[i + 1]
            i += 2
        elif argv[i] == '--device' and i + 1 < len(argv):
            device = int(argv[i + 1])
            i += 2
        elif path is None and not argv[i].startswith('--'):
            path = argv[i]
            i += 1
        else:
            sys.stderr.write('usage: snapshot_events.py FILE [--level tensor|segment] [--device N]\n')
            return 2
    if path is None or level not in ('tensor', 'segment'):
        sys.stderr.write('usage: snapshot_events.py FILE [--level tensor|segment] [--device N]\n')
        return 2
    with open(path, 'rb') as f:
        snap = pickle.load(f)
    if isinstance(snap, list):          # very old snapshots: segments only
        snap = {'segments': snap, 'device_traces': []}
    traces = snap.get('device_traces') or []
    trace = traces[device] if device < len(traces) else []
    segs = [s for s in snap.get('segments', []) if s.get('device', 0) == device]
    final_blocks = []
    for s in segs:
        addr = s['address']
        for b in s.get('blocks', []):
            if b.get('state') == 'active_allocated':
                final_blocks.append((addr, b['size']))
            addr += b['size']
    final_segs = [(s['address'], s['total_size']) for s in segs]
    t_init, t_events, peak_alloc = reconstruct(trace, final_blocks, 'alloc', 'free_completed', round512)
    s_init, s_events, peak_res = reconstruct(trace, final_segs, 'segment_alloc', 'segment_free', lambda n: n)
    init, events = (t_init, t_events) if level == 'tensor' else (s_init, s_events)
    out = sys.stdout
    out.write('R %d %d %d %d\n' % (peak_res, peak_alloc, len(events), len(init)))
    out.write(''.join('I %d %d\n' % (a, s) for a, s in init))
    out.write(''.join(('A %d %d\n' % (a, s)) if op == 'A' else ('F %d\n' % a) for op, a, s in events))
    out.write('E\n')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
