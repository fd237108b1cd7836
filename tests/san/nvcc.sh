#!/usr/bin/env bash
# nvcc for the sanitizer runs (make san-test sets NVCC to this file): test
# scripts that build a program of their own with "$NVCC" get its host code
# instrumented and the sanitizer runtime linked first, as the Makefile's
# sanitized trees do, so that the program can host the sanitized
# libtrainshim.so (a runtime loaded only as the preloaded shim's dependency
# would come after libc and intercept nothing).  TS_SAN_NVCCFLAGS holds the
# flags (set by make san-test).
exec "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" "$@" ${TS_SAN_NVCCFLAGS:-}
