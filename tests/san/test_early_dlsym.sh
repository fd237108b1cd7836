#!/usr/bin/env bash
# dlsym calls made before trainshim's initializer runs -- from the constructor
# of a library the program depends on, as sanitizer runtimes and programs'
# own early dlsym interposers do -- answer exactly what glibc answers
# (RTLD_NEXT relative to the caller, RTLD_DEFAULT, a missing symbol with its
# dlerror, a library handle), without and with the shim; after the
# initializer, a handle lookup of a hooked driver symbol gets the hook.
# Built here with ${CC:-gcc} (make san-test passes a sanitizing CC, so the
# program then hosts the sanitized shim).
set -u
B=${B:-build}
shim=$PWD/$B/libtrainshim.so
[ -e "$shim" ] || { echo "FAIL: $shim not built"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# shellcheck disable=SC2086  # CC may carry flags
${CC:-gcc} -std=gnu11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror -fPIC -shared -o "$tmp/libearly.so" \
  tests/san/early_dlsym_lib.c -ldl || { echo "FAIL: cannot build the library"; exit 1; }
# shellcheck disable=SC2086
${CC:-gcc} -std=gnu11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror -o "$tmp/early" tests/san/early_dlsym_main.c \
  -L"$tmp" -learly -Wl,-rpath,"$tmp" -ldl || { echo "FAIL: cannot build the program"; exit 1; }
export LD_LIBRARY_PATH="$PWD/$B/emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" TRAINSHIM_LOG="$tmp/log.%p"
fail=0
"$tmp/early" plain || { echo "FAIL: without the shim"; fail=1; }
LD_PRELOAD="$shim" "$tmp/early" shim || { echo "FAIL: with the shim preloaded"; fail=1; }
exit $fail
