#!/usr/bin/env bash
# TRAINSHIM_OFFLOAD with the demo training job (build/workloads/mlp_train,
# batch 16384: its activations need about 44-48 MiB of device memory at
# peak) on a 28 MiB device (EMU_DEVICE_MEMORY, ~60% of that peak), under
# emulator jitter and two seeds:
#   - without offload it fails, with trainshim's out-of-memory report;
#   - TRAINSHIM_OFFLOAD=on completes with every loss and the weights checksum
#     bit-identical to the run on an unlimited device without the shim;
#   - TRAINSHIM_OFFLOAD=managed completes the same (managed memory; one seed);
#   - on a device without host-backed VMM (EMU_HOST_VMM=0), =on says
#     "offload unavailable: <reason>" once and the job fails as without it.
set -u
B=${B:-build}
bin=$PWD/$B/workloads/mlp_train
shim=$PWD/$B/libtrainshim.so
for f in "$bin" "$shim"; do [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export EMU_JITTER_US=${EMU_JITTER_US:-50} TRAINSHIM_LOG="$tmp/trainshim.%p.log"
steps=3 batch=16384 small=28M
fail=0
"$bin" $steps $batch > "$tmp/plain" || { echo "FAIL: plain run"; exit 1; }
grep -q '^weights checksum [0-9a-f]\{16\}$' "$tmp/plain" || { echo "FAIL: no checksum line"; exit 1; }
# without offload: the job cannot run on the small device
if EMU_DEVICE_MEMORY=$small LD_PRELOAD="$shim" "$bin" $steps $batch > "$tmp/nooff" 2> "$tmp/nooff.err"; then
  echo "FAIL: mlp_train fits in $small without offload: the test proves nothing"; fail=1
fi
grep -q '^trainshim: out of memory on device 0' "$tmp/nooff.err" || { echo "FAIL: no OOM report"; cat "$tmp/nooff.err"; fail=1; }
for seed in 1 5; do
  for mode in on managed; do
    [ $mode = managed ] && [ $seed != 1 ] && continue
    out=$tmp/$mode.$seed
    if ! EMU_SEED=$seed EMU_DEVICE_MEMORY=$small TRAINSHIM_OFFLOAD=$mode LD_PRELOAD="$shim" \
         "$bin" $steps $batch > "$out" 2> "$out.err"; then
      echo "FAIL: TRAINSHIM_OFFLOAD=$mode (seed $seed) did not complete:"; tail -3 "$out.err"; fail=1; continue
    fi
    cmp -s "$tmp/plain" "$out" || { echo "FAIL: TRAINSHIM_OFFLOAD=$mode (seed $seed) output differs:"; diff "$tmp/plain" "$out" | head; fail=1; }
  done
done
if EMU_HOST_VMM=0 EMU_DEVICE_MEMORY=$small TRAINSHIM_OFFLOAD=on LD_PRELOAD="$shim" "$bin" $steps $batch > "$tmp/novmm" 2> "$tmp/novmm.err"; then
  echo "FAIL: completed without host-backed VMM"; fail=1
fi
n=$(grep -c '^trainshim: warning: offload unavailable: ' "$tmp/novmm.err")
[ "$n" = 1 ] || { echo "FAIL: $n 'offload unavailable' lines (want 1):"; cat "$tmp/novmm.err"; fail=1; }
[ $fail = 0 ] && echo "offload oom ok: $(tail -1 "$tmp/plain") on $small with offload on and managed"
exit $fail
