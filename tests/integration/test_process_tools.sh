#!/usr/bin/env bash
# `trainshim run` (preloads the shim, propagates exit codes and signals,
# forwards SIGTERM, reports the logs of the run) and `trainshim config`
# (option list, README table, effective values).  Run from the repo root
# with $B set (tests/run.sh).
set -u
B=${B:-build}
TS=$PWD/$B/trainshim
LIB=$(realpath "$PWD/$B/libtrainshim.so" 2>/dev/null)
ulimit -c 0 # the signal checks crash programs on purpose
fail=0
check() { # check DESCRIPTION COMMAND...: the command must succeed
    local what=$1; shift
    if ! "$@"; then echo "FAIL: $what"; fail=1; fi
}
not() { ! "$@"; }
[ -x "$TS" ] && [ -f "$LIB" ] || { echo "FAIL: $TS or $B/libtrainshim.so not built"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
unset TRAINSHIM TRAINSHIM_CONF TRAINSHIM_LOG TRAINSHIM_STRICT TRAINSHIM_VERBOSE LD_PRELOAD

# ---- trainshim run: exit status ---------------------------------------------------
for code in 0 1 3 255; do
    "$TS" run -- sh -c "exit $code" 2>/dev/null; rc=$?
    check "run propagates exit $code (got $rc)" [ $rc = $code ]
done
"$TS" run sh -c 'exit 7' 2>/dev/null; rc=$?
check "run without -- (got $rc)" [ $rc = 7 ]
"$TS" run -- no-such-command-xyz 2>err; rc=$?
check "run: command not found is 127 (got $rc)" [ $rc = 127 ]
check "run: says command not found: $(cat err)" grep -q "trainshim: error: run: no-such-command-xyz: command not found" err
"$TS" run -- /etc/passwd 2>err; rc=$?
check "run: not executable is 126 (got $rc)" [ $rc = 126 ]
"$TS" run 2>/dev/null; rc=$?
check "run: no command is a usage error (got $rc)" [ $rc = 2 ]
"$TS" run --bogus -- true 2>/dev/null; rc=$?
check "run: unknown option is a usage error (got $rc)" [ $rc = 2 ]
"$TS" run --log 2>err; rc=$?
check "run --log without a value: usage error (got $rc)" [ $rc = 2 ]
check "run --log without a value says the value is missing: $(cat err)" grep -q -- '--log needs a value' err
check "run --log without a value is not an unknown option: $(cat err)" sh -c '! grep -q "unknown option" err'
"$TS" run --log 'x.%d.log' -- true 2>err; rc=$?
check "run: a bad --log template is refused (got $rc): $(cat err)" [ $rc = 2 ]
check "run: a bad --log template says why: $(cat err)" grep -q 'escape' err
"$TS" run -- sh -c 'kill -TERM $$' 2>/dev/null; rc=$?
check "run: a child killed by SIGTERM ends trainshim the same way (got $rc)" [ $rc = 143 ]
"$TS" run -- sh -c 'kill -SEGV $$' 2>/dev/null; rc=$?
check "run: SIGSEGV (got $rc)" [ $rc = 139 ]
check "run: no core file of its own" [ -z "$(ls core* 2>/dev/null)" ]

# ---- LD_PRELOAD and TRAINSHIM_LOG ---------------------------------------------------
out=$("$TS" run -- sh -c 'echo "$LD_PRELOAD"' 2>/dev/null)
check "run preloads the shim: '$out' vs '$LIB'" [ "$out" = "$LIB" ]
out=$(LD_PRELOAD=libm.so.6 "$TS" run -- sh -c 'echo "$LD_PRELOAD"' 2>/dev/null)
check "run prepends to an existing LD_PRELOAD: '$out'" [ "$out" = "$LIB:libm.so.6" ]
out=$(LD_PRELOAD="$LIB" "$TS" run -- sh -c 'echo "$LD_PRELOAD"' 2>/dev/null)
check "run does not preload twice: '$out'" [ "$out" = "$LIB" ]
out=$("$TS" run --log "$work/l/run.%p.log" -- sh -c 'echo "$TRAINSHIM_LOG"' 2>/dev/null)
check "--log sets TRAINSHIM_LOG: '$out'" [ "$out" = "$work/l/run.%p.log" ]
out=$("$TS" run --log="$work/x.log" -- sh -c 'echo "$TRAINSHIM_LOG"' 2>/dev/null)
check "--log=T form: '$out'" [ "$out" = "$work/x.log" ]

# ---- which logs it reports -----------------------------------------------------------
# A stand-in program writes the log the shim would (the template with its pid);
# a log from before the run and one of another template are not reported.
mkdir -p logs
echo old >logs/run.1.log
echo other >logs/other.log
"$TS" run --log "$work/logs/run.%p.log" -- sh -c 'echo x >"$0/logs/run.$$.log"; sh -c "echo y >\"$0/logs/run.\$\$.log\""' "$work" 2>err
child=$(sed -n 's/^trainshim:   .*run\.\([0-9]*\)\.log$/\1/p' err | head -n 1)
check "run lists the child's log first: $(cat err)" [ -n "$child" ] && [ -f "logs/run.$child.log" ] && [ "$(cat "logs/run.$child.log")" = x ]
check "run lists the grandchild's log too: $(cat err)" [ "$(grep -c '^trainshim:   .*/logs/run\.[0-9]*\.log$' err)" = 2 ]
check "run does not list older logs: $(cat err)" not grep -q 'run\.1\.log' err
check "run does not list other files: $(cat err)" not grep -q 'other\.log' err
check "run says how to summarize: $(cat err)" grep -q "^trainshim: summarize with: .*trainshim report .*logs/run\.$child\.log" err

# the default template: trainshim.<host>.<pid>.log and the .r<rank> variant
( cd logs && "$TS" run -- sh -c 'h=$(hostname); echo a >"trainshim.$h.$$.log"; echo b >"trainshim.$h.$$.r3.log"' 2>../err )
check "default template and its rank variant: $(cat err)" [ "$(grep -c "^trainshim:   trainshim\.$(hostname)\.[0-9]*\(\.r3\)\?\.log$" err)" = 2 ]
"$TS" run -- true 2>err
check "run says when no log was written: $(cat err)" grep -q "^trainshim: no event log was written" err
TRAINSHIM=0 "$TS" run -- true 2>err
check "run says when the shim was off: $(cat err)" grep -q "^trainshim: no event log: TRAINSHIM=0 turned the shim off" err

# ---- signals reach the child ---------------------------------------------------------
cat >waiter.py <<'EOF'
import signal, sys, time
def h(sig, frame):
    print("child got", sig); sys.stdout.flush(); sys.exit(3)
signal.signal(signal.SIGTERM, h)
open("ready", "w").close()
time.sleep(20)
sys.exit(9)
EOF
"$TS" run -- python3 waiter.py >out 2>/dev/null &
ts_pid=$!
for _ in $(seq 100); do [ -f ready ] && break; sleep 0.05; done
kill -TERM $ts_pid
wait $ts_pid; rc=$?
check "SIGTERM to trainshim run reaches the child, whose status it returns (rc $rc, out $(cat out))" [ $rc = 3 ] && grep -q "child got 15" out

# ---- trainshim config -------------------------------------------------------------------
"$TS" config >list; rc=$?
check "config exits 0" [ $rc = 0 ]
check "config lists TRAINSHIM_LOG_BUFFER with type and default" grep -q '^TRAINSHIM_LOG_BUFFER  (size, default 256KiB)$' list
check "config lists TRAINSHIM_STRICT" grep -q '^TRAINSHIM_STRICT  (bool, default 0)$' list
check "config explains TRAINSHIM=0" grep -q '^TRAINSHIM=0 turns the shim off' list
"$TS" config --markdown >md
check "markdown header" [ "$(head -n 2 md)" = "| Variable | Type | Default | Meaning |
|---|---|---|---|" ]
check "markdown row" grep -qF '| `TRAINSHIM_LOG_BUFFER` | size | `256KiB` | Per-thread event buffer' md
check "markdown rows: one per option" [ "$(grep -c '^| `TRAINSHIM_' md)" = "$(grep -c '^TRAINSHIM_[A-Z_0-9]*  (' list)" ]
out=$(TRAINSHIM_LOG_BUFFER=1MiB TRAINSHIM_CONF=verbose:on "$TS" config --effective 2>&1); rc=$?
check "effective: values and sources (rc $rc): $out" [ $rc = 0 ] && grep -q '^TRAINSHIM_LOG_BUFFER=1048576  # variable$' <<<"$out" && grep -q '^TRAINSHIM_VERBOSE=1  # TRAINSHIM_CONF$' <<<"$out" && grep -q '^TRAINSHIM_STRICT=0  # default$' <<<"$out"
out=$(TRAINSHIM_LOG_BUFFER=lots "$TS" config --effective 2>&1); rc=$?
check "effective: a bad value warns, exit 1 (rc $rc): $out" [ $rc = 1 ] && grep -q '^trainshim: warning: TRAINSHIM_LOG_BUFFER=lots: ' <<<"$out"
out=$(TRAINSHIM_STRICT=1 TRAINSHIM_LOG_BUFFER=lots "$TS" config --effective 2>&1); rc=$?
check "effective under STRICT still prints (rc $rc): $out" [ $rc = 1 ] && grep -q 'the shim would exit' <<<"$out"
"$TS" config --nope 2>/dev/null; rc=$?
check "config: unknown argument (rc $rc)" [ $rc = 2 ]

[ $fail = 0 ] && echo "test_process_tools: all checks passed"
exit $fail
