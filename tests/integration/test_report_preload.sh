#!/usr/bin/env bash
# End to end: the demo trainer (tests/workloads/mlp_train) under the shim on
# the emulator writes its event log where the default template says (working
# directory, .r<rank> suffix), and `trainshim report` reads it as complete
# with balanced allocations and copies both ways.  Then a run killed with
# SIGKILL mid-training still reads, as incomplete or truncated, up to its last
# complete record.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
B=${B:-build}
T=$(mktemp -d)
pid=; trap '[ -z "$pid" ] || kill -9 "$pid" 2>/dev/null; rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
for f in "$B/libtrainshim.so" "$B/trainshim" "$B/workloads/mlp_train" "$B/emu/libcuda.so.1"; do
  [ -e "$f" ] || { echo "FAIL: $f not built"; exit 1; }
done
export LD_LIBRARY_PATH="$ROOT/$B/emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
run_shimmed() { LD_PRELOAD="$ROOT/$B/libtrainshim.so" "$@"; }

# ---- a clean run, rank 3 of 4, default log template
mkdir "$T/run" && cd "$T/run"
(unset TRAINSHIM_LOG; RANK=3 WORLD_SIZE=4 run_shimmed timeout 120 "$ROOT/$B/workloads/mlp_train" 8 > out.txt 2>&1)
rc=$?
cd "$ROOT"
[ $rc = 0 ] || bad "mlp_train under the shim: exit $rc: $(tail -5 "$T/run/out.txt")"
logs=("$T"/run/trainshim.*.r3.log)
[ ${#logs[@]} = 1 ] && [ -f "${logs[0]}" ] || bad "expected one trainshim.<host>.<pid>.r3.log, have: $(ls "$T/run")"
"$B/trainshim" report --format json "${logs[0]}" > "$T/r.json" 2> "$T/r.err" || bad "report: $(cat "$T/r.err")"
"$B/trainshim" report "${logs[0]}" > "$T/r.txt" 2>&1 || bad "text report failed"
python3 - "$T/r.json" <<'EOF' || fail=1
import json, sys
r = json.load(open(sys.argv[1]))
run, m, c = r["run"], r["memory"], r["copies"]
errs = []
def want(ok, what):
    if not ok: errs.append(what)
want(run["complete"] and not run["truncated"], f"status {run['status']} {run['note']}")
want(run["rank"] == 3 and run["world_size"] == 4, f"rank {run['rank']} of {run['world_size']}")
want(run["command"].endswith("mlp_train 8"), f"command {run['command']!r}")
want(len(r["devices"]) >= 1, "no device record")
want(m["alloc_calls"] > 0 and m["alloc_calls"] == m["free_calls"], f"allocs {m['alloc_calls']} frees {m['free_calls']}")
want(m["alloc_failed"] == 0 and m["free_unknown_pointer"] == 0, "failed or unknown frees")
want(m["live_at_end_bytes"] == 0, f"live at end {m['live_at_end_bytes']}")
want(0 < m["peak_allocated_bytes"] <= m["alloc_requested_bytes"], f"peak {m['peak_allocated_bytes']}")
want(c["h2d_bytes"] > 0 and c["d2h_bytes"] > 0, f"copies h2d {c['h2d_bytes']} d2h {c['d2h_bytes']}")
want(r["errors"] == [], f"errors {r['errors']}")
for e in errs: print("FAIL:", e)
sys.exit(1 if errs else 0)
EOF

# ---- killed with SIGKILL while training: the log still reads
mkdir "$T/kill" && cd "$T/kill"
# exec, not the shell function: $! must be the trainer itself, or kill -9
# would hit a subshell and leave the trainer running after the test.
EMU_JITTER_US=2000 TRAINSHIM_LOG="$T/kill/k.log" LD_PRELOAD="$ROOT/$B/libtrainshim.so" \
  "$ROOT/$B/workloads/mlp_train" 100000 > out.txt 2>&1 &
pid=$!
cd "$ROOT"
# wait until the writer thread has put records after the header on disk
size0=
for _ in $(seq 600); do
  size=$(stat -c %s "$T/kill/k.log" 2>/dev/null || echo 0)
  [ -z "$size0" ] && [ "$size" -gt 0 ] && size0=$size
  [ -n "$size0" ] && [ "$size" -gt $((size0 + 1000)) ] && break
  sleep 0.05
done
kill -9 $pid; wait $pid 2>/dev/null; rc=$?
[ $rc = 137 ] || bad "the trainer was not killed while running (exit $rc)"
"$B/trainshim" report --format json "$T/kill/k.log" > "$T/k.json" 2> "$T/k.err" || bad "report of the killed run: $(cat "$T/k.err")"
python3 - "$T/k.json" <<'EOF' || fail=1
import json, sys
r = json.load(open(sys.argv[1]))
run = r["run"]
errs = []
if run["complete"] or run["status"] not in ("incomplete", "truncated"): errs.append(f"status {run['status']}")
if "corrupt" in (run["note"] or ""): errs.append(f"note {run['note']}")
if r["memory"]["alloc_calls"] == 0: errs.append("no allocation recorded before the kill")
for e in errs: print("FAIL:", e)
sys.exit(1 if errs else 0)
EOF
[ $fail = 0 ] && echo ok
exit $fail
