#!/usr/bin/env bash
# The demo (scripts/demo.sh, `make demo`) on two ranks through mpirun shows
# every report section, each with content: the rank table, memory, copies,
# per-rank compute and communication (the AllReduce of every step), the
# ranks' compute/communication table with its straggler lines, the GPU
# timeline from CUPTI, and rank 0's allocation sites (with stacks) and memory
# timeline.  Fails, not skips, without mpirun (scripts/setup.sh installs it).
set -u
B=${B:-build}
command -v mpirun > /dev/null ||
  { echo "FAIL: mpirun not found: scripts/setup.sh installs it (Debian package openmpi-bin)"; exit 1; }
for f in "$B/workloads/mlp_train" "$B/trainshim" "$B/libtrainshim.so"; do
  [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }
done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
unset RANK WORLD_SIZE LOCAL_RANK SLURM_PROCID SLURM_LOCALID SLURM_NTASKS PMI_RANK PMI_SIZE TORCHELASTIC_RUN_ID \
  MLP_RENDEZVOUS TRAINSHIM_STACKS TRAINSHIM_CUPTI
STEPS=6
if ! DEMO_LOGDIR="$tmp/logs" DEMO_STEPS=$STEPS timeout -k 5 120 bash scripts/demo.sh > "$tmp/demo.out" 2> "$tmp/demo.err"; then
  echo "FAIL: demo failed"; tail -n 30 "$tmp/demo.out" "$tmp/demo.err"; exit 1
fi
fail=0
[ "$(cd "$tmp/logs" && ls | tr '\n' ' ')" = "report.html trainshim.r0.log trainshim.r1.log " ] ||
  { echo "FAIL: demo logs: $(ls "$tmp/logs")"; fail=1; }
# section TITLE PATTERN: the section whose header starts with TITLE has a line matching PATTERN
section() {
  awk -v t="== $1" -v p="$2" 'index($0, t) == 1 { on = 1; seen = 1; next } /^== / { on = 0 } on && $0 ~ p { hit = 1 }
    END { exit !(seen && hit) }' "$tmp/demo.out" || { echo "FAIL: section '$1' missing or without /$2/"; fail=1; }
}
section "RANKS ==" "^1 +[0-9]+ .* complete "
section "DEVICE MEMORY" "^allocations +[1-9][0-9]* "
section "COPIES" "^H2D +[1-9]"
for r in 0 1; do grep -q "^== RANK $r ==" "$tmp/demo.out" || { echo "FAIL: no RANK $r section"; fail=1; }; done
section "COMPUTE" "^GEMM calls +$((STEPS * 5)) "
section "COMMUNICATION" "^AllReduce +$STEPS "
section "RANKS: COMPUTE AND COMMUNICATION" "^step +slowest ms"
section "RANKS: COMPUTE AND COMMUNICATION" "^[1-9][0-9]* +[0-9.]+ +[01] +[0-9.]+ +[01] "
section "GPU TIMELINE" "^-- rank 1 "
section "GPU TIMELINE" "^source +CUPTI activity: [1-9][0-9]* kernels"
section "TOP ALLOCATION SITES" "^#1 "
section "TOP ALLOCATION SITES" " main"
section "MEMORY TIMELINE" "^ +[0-9.]+ +[0-9.]+ [KM]iB"
section "COPIES" "^converted to pinned +[0-9.]+ MiB"
# the demo's copies are converted but for a few bytes of tiny ones: no "pin those"
section "ADVICE" "trainshim converted [0-9.]+ MiB of it .*KiB in small copies left"
# the GPU idles while each step waits 5 ms for its batch (demo.sh: MLP_LOAD_MS);
# before that wait, the advice came and went with how fast a batch was built
section "ADVICE" "GPU idle [0-9]+% of the run"
grep -q "^trainshim: \(warning\|error\)" "$tmp/demo.err" && { echo "FAIL: trainshim warned in the demo:"; cat "$tmp/demo.err"; fail=1; }
[ $fail = 0 ] && echo "ok: the two-rank demo fills every report section"
exit $fail
