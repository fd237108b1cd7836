#!/usr/bin/env bash
# trainshim's memory-snapshot export of a small GPT run (tests/torch/gpt_small.py
# under the shim as by default: trainshim adds backend:cudaMallocAsync, under
# which torch refuses its own snapshot) loads in torch's own torch.cuda._memory_viz:
# trace_plot and segment_plot render it, and the rendered page carries the
# trace's allocations (their count matches the export's alloc events).
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/torch/lib.sh
torch_env
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
dims=(--steps 3 --batch 4 --seq 64 --layers 2 --dim 128 --heads 4 --vocab 512)
LD_LIBRARY_PATH="$EMU_DIR" LD_PRELOAD="$EMU_PRELOAD" EMU_UNKNOWN_KERNELS=skip EMU_COMPUTE=skip \
  "$TRAINSHIM" run --log "$tmp/gpt.%p.log" -- "$TORCH_PY" tests/torch/gpt_small.py "${dims[@]}" \
  > "$tmp/out" 2> "$tmp/err" || { echo "gpt_small.py failed:"; tail -30 "$tmp/err"; exit 1; }
grep -qx done "$tmp/out"
want_torch_alloc "cudaMallocAsync, added by trainshim" "$tmp"/gpt.*.log
"$TRAINSHIM" export --type memory-snapshot "$tmp"/gpt.*.log -o "$tmp/snap.pickle"
"$TORCH_PY" - "$tmp/snap.pickle" <<'PY'
import contextlib, copy, io, pickle, sys
from torch.cuda import _memory_viz as mv
snap = pickle.load(open(sys.argv[1], "rb"))
trace = [e for t in snap["device_traces"] for e in t]
allocs = sum(1 for e in trace if e["action"] == "alloc")
assert allocs > 100, f"only {allocs} alloc events"
assert snap["segments"], "no segments"
# trace_plot and segment_plot embed the pickle in their page; the reading is
# done by the parts that walk it in Python: the alloc/free pairing of
# filter_freed (it prints every free without its request), segsum (segments
# and blocks), trace (events with their frames), memory / segments (flame
# graph lines from blocks and frames)
out = io.StringIO()
with contextlib.redirect_stdout(out):
    page = mv.trace_plot(copy.deepcopy(snap), filter_freed=True)
    seg = mv.segment_plot(snap)
    summary = mv.segsum(snap)
    events = mv.trace(snap)
    mem = mv.memory(snap, format_flamegraph=lambda lines: lines)
    segs = mv.segments(snap, format_flamegraph=lambda lines: lines)
assert "free_completed without free_requested" not in out.getvalue(), out.getvalue()[:500]
assert isinstance(page, str) and "snapshot.pickle" in page and isinstance(seg, str) and "snapshot.pickle" in seg
assert "segment" in summary.lower() and summary.count("\n") >= len(snap["segments"]), summary[:300]
assert events.count("alloc") >= allocs, "trace() lost alloc events"
assert mem or segs, "no flame graph lines"
print(f"memory_viz: {allocs} alloc events, {len(snap['segments'])} segments; trace_plot {len(page)} chars, "
      f"segment_plot {len(seg)} chars, segsum {summary.count(chr(10))} lines, trace {events.count(chr(10))} lines")
PY
