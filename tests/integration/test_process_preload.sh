#!/usr/bin/env bash
# The shim preloaded into programs: it changes nothing they compute or print,
# writes nothing when they never use CUDA, keeps TRAINSHIM=0 a pure
# passthrough, lets signals end the process exactly as without it (running the
# program's own handlers), and fork without exec in a threaded process that
# uses CUDA does not hang.  Run from the repo root with $B set (tests/run.sh).
set -u
B=${B:-build}
ROOT=$PWD
LIB=$ROOT/$B/libtrainshim.so
export LD_LIBRARY_PATH="$PWD/$B/emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
ulimit -c 0 # the signal checks crash programs on purpose
fail=0
check() { # check DESCRIPTION COMMAND...: the command must succeed
    local what=$1; shift
    if ! "$@"; then echo "FAIL: $what"; fail=1; fi
}
[ -f "$LIB" ] || { echo "FAIL: $LIB not built"; exit 1; }
command -v python3 >/dev/null || { echo "FAIL: python3 is needed"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
unset TRAINSHIM TRAINSHIM_CONF TRAINSHIM_LOG TRAINSHIM_STRICT TRAINSHIM_VERBOSE

# run_both NAME CMD...: runs CMD in the empty directory run/ without and with
# the shim; compares exit status, stdout and stderr, and checks that the
# shim's run left no file behind.
mkdir run o
cd run
run_both() {
    local name=$1; shift
    "$@" >../o/plain.out 2>../o/plain.err; local plain=$?
    LD_PRELOAD=$LIB "$@" >../o/shim.out 2>../o/shim.err; local shim=$?
    check "$name: exit status $shim under the shim, $plain without" [ "$shim" = "$plain" ]
    check "$name: same stdout" cmp -s ../o/plain.out ../o/shim.out
    check "$name: same stderr ($(head -c 300 ../o/shim.err))" cmp -s ../o/plain.err ../o/shim.err
    check "$name: no file created ($(ls -A))" [ -z "$(ls -A)" ]
}

run_both "/bin/true" /bin/true
run_both "/bin/false" /bin/false
run_both "exit 3" sh -c 'exit 3'
run_both "python prints" python3 -c 'import sys; print("hello"); sys.stdout.flush(); sys.exit(4)'
TRAINSHIM=0 run_both "TRAINSHIM=0" python3 -c 'print(42)'

# The shim is really loaded (else the checks above prove nothing).
out=$(LD_PRELOAD=$LIB TRAINSHIM_VERBOSE=1 /bin/true 2>&1)
check "VERBOSE prints the configuration once: $out" [ "$(grep -c 'effective configuration' <<<"$out")" = 1 ]
out=$(LD_PRELOAD=$LIB TRAINSHIM=0 TRAINSHIM_VERBOSE=1 TRAINSHIM_LOG_BUFFER=bad /bin/true 2>&1)
check "TRAINSHIM=0 reads nothing, prints nothing: $out" [ -z "$out" ]
out=$(LD_PRELOAD=$LIB TRAINSHIM_LOG_BUFFER=12Q sh -c 'echo ran' 2>&1)
check "a bad value warns once and the program runs: $out" \
    [ "$out" = "trainshim: warning: TRAINSHIM_LOG_BUFFER=12Q: unknown size suffix (use B, K/M/G/T, KiB/MiB/GiB/TiB or KB/MB/GB/TB); using default 256KiB
ran" ]
out=$(LD_PRELOAD=$LIB TRAINSHIM_STRICT=1 TRAINSHIM_LOG_BUFFER=12Q sh -c 'echo ran' 2>&1); rc=$?
check "STRICT: exit 1 before the program runs ($rc): $out" [ $rc = 1 ] && ! grep -q ran <<<"$out"
check "STRICT: error message: $out" grep -q '^trainshim: error: TRAINSHIM_LOG_BUFFER=12Q: ' <<<"$out"

cd "$work"
# ---- signals: same status as without the shim --------------------------------
sig_both() { # sig_both NAME CMD...: same status and stdout with and without the shim
    local name=$1; shift
    timeout 20 "$@" >plain.out 2>/dev/null; local plain=$?
    LD_PRELOAD=$LIB timeout 20 "$@" >shim.out 2>shim.err; local shim=$?
    check "$name: status $shim under the shim, $plain without" [ "$shim" = "$plain" ]
    check "$name: same stdout ($(cat shim.out))" cmp -s plain.out shim.out
    check "$name: nothing on stderr ($(head -c 300 shim.err))" [ ! -s shim.err ]
    rm -f plain.out shim.out shim.err
}
sig_both "SIGTERM, default action" python3 -c 'import os, signal, time; os.kill(os.getpid(), signal.SIGTERM); time.sleep(10)'
sig_both "SIGTERM, program handler" python3 -c '
import os, signal, sys, time
def h(sig, frame):
    print("handled", sig); sys.exit(5)
signal.signal(signal.SIGTERM, h)
os.kill(os.getpid(), signal.SIGTERM); time.sleep(10)'
sig_both "SIGINT, python KeyboardInterrupt" python3 -c '
import os, signal, time
try:
    os.kill(os.getpid(), signal.SIGINT); time.sleep(10)
except KeyboardInterrupt:
    print("interrupted")'
sig_both "SIGTERM from outside, shell" sh -c 'kill -TERM $$; sleep 10'
# The same after CUDA calls: through the shim's hooks (resolved first, from
# the preloaded library) the shim is in use, and its handlers are installed.
used='import ctypes, os, signal, sys, time
ctypes.CDLL("libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
cuda = ctypes.CDLL(None)
p = ctypes.c_void_p()
assert cuda.cudaMalloc(ctypes.byref(p), 1 << 20) == 0
'
# sig_expect NAME STATUS STDOUT CMD...: under the shim only, against the
# status a plain run has (143 = SIGTERM, 134 = SIGABRT, 139 = SIGSEGV).
sig_expect() {
    local name=$1 want=$2 want_out=$3; shift 3
    LD_PRELOAD=$LIB timeout 20 "$@" >shim.out 2>shim.err; local rc=$?
    check "$name: status $rc, want $want" [ "$rc" = "$want" ]
    check "$name: stdout '$(cat shim.out)', want '$want_out'" [ "$(cat shim.out)" = "$want_out" ]
    check "$name: nothing on stderr ($(head -c 300 shim.err))" [ ! -s shim.err ]
    rm -f shim.out shim.err
}
sig_expect "SIGTERM after CUDA use" 143 "" python3 -c "$used"'
os.kill(os.getpid(), signal.SIGTERM); time.sleep(10)'
sig_expect "SIGINT after CUDA use" 0 interrupted python3 -c "$used"'
try:
    os.kill(os.getpid(), signal.SIGINT); time.sleep(10)
except KeyboardInterrupt:
    print("interrupted")'
sig_expect "SIGTERM handler after CUDA use" 3 handled python3 -c "$used"'
signal.signal(signal.SIGTERM, lambda *a: (print("handled"), sys.exit(3)))
os.kill(os.getpid(), signal.SIGTERM); time.sleep(10)'
sig_expect "SIGSEGV after CUDA use" 139 "" python3 -c "$used"'ctypes.string_at(0)'
sig_expect "SIGABRT after CUDA use" 134 "" python3 -c "$used"'os.abort()'

# What a process killed by a signal recorded is in its log: the shim's handler
# flushed it (the log's writer flushes only every 200 ms; these die at once).
TS=$ROOT/$B/trainshim
for how in term segv abort; do
    LD_PRELOAD=$LIB TRAINSHIM_LOG="$work/sig.$how.log" timeout 20 python3 -c "$used"'
how = sys.argv[1]
if how == "term": os.kill(os.getpid(), signal.SIGTERM); time.sleep(10)
if how == "segv": ctypes.string_at(0)
os.abort()' $how >/dev/null 2>&1
    allocs=$("$TS" report "$work/sig.$how.log" 2>/dev/null | sed -n 's/^allocations  *\([0-9]*\) .*/\1/p')
    check "SIG$how: the allocation made before the signal is in the log (allocations: '$allocs')" [ "$allocs" = 1 ]
done

# A fault inside a hooked call (a pageable copy from or to an unmapped host
# address: the shim's staging touches it, on the caller or a helper thread),
# and a fault while other threads are inside hooks writing the log: the
# process dies of SIGSEGV as without the shim, never hangs in the handler,
# and the log keeps what came before.
for how in h2d d2h busy; do
    LD_PRELOAD=$LIB TRAINSHIM_LOG="$work/insegv.$how.log" timeout 60 python3 -c "$used"'
import threading
how = sys.argv[1]
n = 16 << 20
d = ctypes.c_void_p()
assert cuda.cudaMalloc(ctypes.byref(d), n) == 0
if how == "h2d": cuda.cudaMemcpy(d, ctypes.c_void_p(4096), ctypes.c_size_t(n), 1)
if how == "d2h": cuda.cudaMemcpy(ctypes.c_void_p(4096), d, ctypes.c_size_t(n), 2)
def churn():
    q = ctypes.c_void_p()
    while True:
        cuda.cudaMalloc(ctypes.byref(q), 4096); cuda.cudaFree(q)
for _ in range(4): threading.Thread(target=churn, daemon=True).start()
time.sleep(0.3)
ctypes.string_at(0)' $how >/dev/null 2>&1
    rc=$?
    check "fault inside a hook ($how): status $rc, want 139 (124: hung)" [ "$rc" = 139 ]
    allocs=$("$TS" report "$work/insegv.$how.log" 2>/dev/null | sed -n 's/^allocations  *\([0-9]*\) .*/\1/p')
    check "fault inside a hook ($how): the allocations before it are in the log ('$allocs')" [ "${allocs:-0}" -ge 2 ]
done

# A handler installed BEFORE the shim initializes (the shim dlopen'ed late):
# the shim chains to it.
cat >chain.py <<EOF
import ctypes, os, signal, sys, time
def h(sig, frame):
    print("program handler ran"); sys.stdout.flush(); os._exit(6)
signal.signal(signal.SIGTERM, h)
ctypes.CDLL("$LIB")
os.kill(os.getpid(), signal.SIGTERM); time.sleep(10)
EOF
out=$(timeout 20 python3 chain.py 2>&1); rc=$?
check "handler installed before the shim still runs (rc $rc): $out" [ $rc = 6 ] && [ "$out" = "program handler ran" ]

# ---- fork without exec, threads using CUDA, under the shim --------------------
cat >forker.py <<'EOF'
import ctypes, os, sys, threading
cudart = ctypes.CDLL("libcudart.so.13")
stop = False
errors = []
def worker():
    p = ctypes.c_void_p()
    while not stop:
        r = cudart.cudaMalloc(ctypes.byref(p), 4096)
        if r != 0:
            errors.append(("malloc", r)); return
        r = cudart.cudaFree(p)
        if r != 0:
            errors.append(("free", r)); return
threads = [threading.Thread(target=worker) for _ in range(4)]
for t in threads: t.start()
for i in range(20):
    pid = os.fork()
    if pid == 0:
        # a DataLoader-like worker: no CUDA, some Python, then exit normally
        sum(range(1000))
        sys.stdout.flush()
        os._exit(0) if i % 2 else sys.exit(0)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        errors.append(("child", status))
stop = True
for t in threads: t.join()
print("errors:", errors)
sys.exit(1 if errors else 0)
EOF
[ -f "${LD_LIBRARY_PATH%%:*}/libcudart.so.13" ] || { echo "FAIL: emulator not built ($B/emu)"; fail=1; }
out=$(LD_PRELOAD=$LIB TRAINSHIM_LOG="$work/fork.%p.log" timeout 60 python3 forker.py 2>&1); rc=$?
check "fork in a threaded CUDA process does not hang or fail (rc $rc): $out" [ $rc = 0 ]
logs=$(ls "$work"/fork.*.log 2>/dev/null | wc -l)
check "forked children that never exec write no log of their own (logs: $logs)" [ "$logs" -le 1 ]

[ $fail = 0 ] && echo "test_process_preload: all checks passed"
exit $fail
