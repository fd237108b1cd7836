#!/usr/bin/env bash
# Replays every PyTorch snapshot in $TRACES (default ../shared/traces) with
# `trainshim replay` in each allocator mode, tensor by tensor, on the emulated
# driver, and prints each mode's peak reserved / peak allocated beside what
# PyTorch's own caching allocator reserved on the same run (recorded in the
# snapshot): the memory figure of issue #4 (target ratio <= 1.005).  Mode
# off reserves exactly what cudaMalloc was asked for (the driver's own
# rounding is not modelled), so its ratio is 1 by construction.  Expandable
# runs three times: with --slack 0 (the replay's default: idle pages move
# whenever that saves memory, a trace being one step), --slack none (idle
# pages stay mapped, no moves below the limit) and --slack plan (the shim's
# default: the step plan, idle pages moving until one settles).
set -u
cd "$(dirname "$0")/../.."
B=${B:-build}
TRACES=${TRACES:-$(cd .. && pwd)/shared/traces}
bin=$B/trainshim
[ -x "$bin" ] || { echo "bench_replay: $bin not built" >&2; exit 1; }
shopt -s nullglob
traces=("$TRACES"/*.pickle)
[ ${#traces[@]} -gt 0 ] || { echo "bench_replay: no *.pickle in $TRACES" >&2; exit 1; }
status=0
for t in "${traces[@]}"; do
  echo "$(basename "$t") (tensor level; provider cuda = the emulated driver, fake = in-process)"
  printf '  %-34s %14s %14s %8s %5s %12s %9s %s\n' mode "peak reserved" "peak alloc" ratio ooms "driver calls" "ns/op" provider
  for spec in expandable "expandable --slack none" "expandable --slack plan" caching off; do
    mode=${spec%% *}
    if ! out=$("$bin" replay "$t" --mode $spec --json 2>/dev/null); then
      echo "  $spec: replay failed" >&2; status=1; continue
    fi
    python3 - "$out" "$spec" <<'PY' || status=1
import json, sys
d, mode = json.loads(sys.argv[1]), sys.argv[2]
G = 2**30
print("  %-34s %11.2f GiB %10.2f GiB %8.4f %5d %12d %9.0f %s" % (
    "trainshim " + mode, d["peak_reserved_bytes"] / G, d["peak_allocated_bytes"] / G,
    d["peak_reserved_bytes"] / d["peak_allocated_bytes"], d["ooms"], d["driver_calls"], d["ns_per_op"],
    d["provider"]))
if mode == "off":  # the recorded figures once, after the last mode
    print("  %-34s %11.2f GiB %10.2f GiB %8.4f %5s %12s %9s" % (
        "PyTorch (recorded)", d["recorded_peak_reserved_bytes"] / G,
        d["recorded_peak_allocated_bytes"] / G, d["recorded_ratio"], "-", "-", "-"))
PY
  done
done
exit $status
