# trainshim build.  Everything is found by wildcard so that adding a file
# never needs a Makefile edit:
#   shim/**/*.c hooks/*.c       -> build/libtrainshim.so (and build/libtscore.a for unit tests)
#   tools/**/*.c                -> build/trainshim
#   tests/support/*.c + tools/replay/sim_provider.c -> build/libtstest.a (test-only helpers)
#   tests/emu/<lib>/*.c         -> build/emu/<soname>   (CPU emulator of the CUDA stack)
#   tests/<suite>/test_*.c|.cu  -> build/tests/<suite>/test_*   (run by tests/run.sh)
#   tests/workloads/*.cu        -> build/workloads/*
#   tests/bench/bench_*.c       -> build/bench/bench_*

CUDA_HOME ?= /usr/local/cuda
CC        ?= gcc
NVCC      ?= $(CUDA_HOME)/bin/nvcc
B         ?= build
SAN       ?=
OPT       ?= -O2
# -fno-omit-frame-pointer: stacks stay cheap to unwind, sanitizer reports stay readable.
BASECFLAGS := -std=gnu11 $(OPT) -g -Wall -Wextra -Werror -fPIC -fno-omit-frame-pointer \
              -D_GNU_SOURCE -I$(CUDA_HOME)/include $(SAN)
CFLAGS    ?=
ALLCFLAGS := $(BASECFLAGS) $(CFLAGS)
NVCCFLAGS ?= -O2 -cudart shared -Xcompiler -fPIC,-Wall -Wno-deprecated-gpu-targets
LDSAN     := $(SAN)

.PHONY: all emu shim tools tests bench test demo demo-torch check-toolkit setup clean fuzz san-test format check-layout gpu-check
all: check-toolkit emu shim tools tests

check-toolkit:
	@test -f $(CUDA_HOME)/include/cuda.h || { echo "trainshim: error: CUDA toolkit not found at CUDA_HOME=$(CUDA_HOME) (need include/cuda.h); install it or set CUDA_HOME" >&2; exit 1; }

# ---------------------------------------------------------------- emulator
EMU := $(B)/emu
EMU_COMMON_SRC := $(wildcard tests/emu/common/*.c)
EMUCFLAGS := $(ALLCFLAGS) -Itests/emu -pthread
# libcuda.so.1 is dlopen()ed, so its thread-locals (entry counts, current
# context) are general-dynamic: TLS descriptors get them static TLS when
# there is room, with no __tls_get_addr call per driver call (where the
# compiler has them; not under the sanitizers).
ifeq ($(SAN),)
EMUCFLAGS += $(shell $(CC) -mtls-dialect=gnu2 -E -x c /dev/null >/dev/null 2>&1 && echo -mtls-dialect=gnu2)
endif

# lib-name  soname  version-node(empty = unversioned)  symbol-list  stub-error-code
EMU_LIBS := cuda cudart nccl cublas cublasLt cupti nvml
soname_cuda := libcuda.so.1
soname_cudart := libcudart.so.13
soname_nccl := libnccl.so.2
soname_cublas := libcublas.so.13
soname_cublasLt := libcublasLt.so.13
soname_cupti := libcupti.so.13
soname_nvml := libnvidia-ml.so.1
vnode_cuda :=
vnode_cudart := libcudart.so.13
vnode_nccl :=
vnode_cublas := libcublas.so.13
vnode_cublasLt := libcublasLt.so.13
vnode_cupti := libcupti.so.13
vnode_nvml :=
dir_cuda := driver
dir_cudart := runtime
dir_nccl := nccl
dir_cublas := cublas
dir_cublasLt := cublaslt
dir_cupti := cupti
dir_nvml := nvml
# error code an unimplemented entry point returns (cudaErrorNotSupported, CUDA_ERROR_NOT_SUPPORTED,
# ncclInvalidUsage, CUBLAS_STATUS_NOT_SUPPORTED, CUPTI_ERROR_NOT_SUPPORTED, NVML_ERROR_NOT_SUPPORTED)
stuberr_cuda := 801
stuberr_cudart := 801
stuberr_nccl := 5
stuberr_cublas := 15
stuberr_cublasLt := 15
stuberr_cupti := 27
stuberr_nvml := 3
# lib<name>.so link when it is not lib<lib-name>.so
devlink_nvml := libnvidia-ml.so
# NVML's header: the toolkit's when it has one, else PyPI's nvidia-nvml-dev
NVML_H := $(B)/gen/nvml/nvml.h
$(NVML_H): scripts/fetch-nvml-header.sh
	bash scripts/fetch-nvml-header.sh $@
$(B)/obj/tests/emu/nvml/%.o: EMUCFLAGS += -I$(B)/gen/nvml
# the driver also exports the emu* control API and the driver proc table
extra_exports_cuda := emu[A-Z]*;

define EMU_LIB_RULES
EMU_SRC_$(1) := $$(wildcard tests/emu/$$(dir_$(1))/*.c)
EMU_OBJ_$(1) := $$(patsubst %.c,$(B)/obj/%.o,$$(EMU_SRC_$(1)) $(EMU_COMMON_SRC)) \
                $(B)/gen/emu/stubs_$(1).o $$(if $$(filter cuda,$(1)),$(B)/gen/emu/proctable_cuda.o)
$(B)/gen/emu/stubs_$(1).c: tests/emu/symbols/$(1).txt scripts/gen-emu-stubs.sh
	@mkdir -p $$(@D)
	bash scripts/gen-emu-stubs.sh stubs $$< $(soname_$(1)) $(stuberr_$(1)) > $$@
$(B)/gen/emu/$(1).map: tests/emu/symbols/$(1).txt scripts/gen-emu-stubs.sh
	@mkdir -p $$(@D)
	bash scripts/gen-emu-stubs.sh map $$< "$(vnode_$(1))" "$(extra_exports_$(1))" > $$@
$(EMU)/$(soname_$(1)): $$(EMU_OBJ_$(1)) $(B)/gen/emu/$(1).map
	@mkdir -p $$(@D)
	$(CC) -shared -o $$@ $$(EMU_OBJ_$(1)) -Wl,-soname,$(soname_$(1)) -Wl,-Bsymbolic \
	  -Wl,--version-script=$(B)/gen/emu/$(1).map -Wl,--no-undefined -pthread -ldl -lm -lrt $(LDSAN)
	ln -sf $(soname_$(1)) $(EMU)/$(or $(devlink_$(1)),lib$(1).so)
endef
$(foreach l,$(EMU_LIBS),$(eval $(call EMU_LIB_RULES,$(l))))
$(EMU_OBJ_nvml): | $(NVML_H)

$(B)/gen/emu/proctable_cuda.c: tests/emu/symbols/cuda.txt tests/emu/symbols/emu.txt scripts/gen-emu-stubs.sh
	@mkdir -p $(@D)
	bash scripts/gen-emu-stubs.sh proctable tests/emu/symbols/cuda.txt tests/emu/symbols/emu.txt > $@

$(B)/gen/%.o: $(B)/gen/%.c
	$(CC) $(EMUCFLAGS) -Wno-builtin-declaration-mismatch -c -o $@ $<
$(B)/obj/tests/emu/%.o: tests/emu/%.c $(wildcard tests/emu/*.h tests/emu/*/*.h)
	@mkdir -p $(@D)
	$(CC) $(EMUCFLAGS) -c -o $@ $<

EMU_TARGETS := $(foreach l,$(EMU_LIBS),$(EMU)/$(soname_$(l)))
emu: check-toolkit $(EMU_TARGETS)

# ---------------------------------------------------------------- shim
# Sources and headers by folder: shim/<concern>/, hooks/, tools/<part>/.
rwildcard = $(foreach d,$(wildcard $(1:=/*)),$(call rwildcard,$d,$2) $(filter $(subst *,%,$2),$d))
SHIM_HDR := $(call rwildcard,shim,*.h *.def)
HOOKS_HDR := $(wildcard hooks/*.h hooks/*.def)
TOOLS_HDR := $(call rwildcard,tools,*.h)
SHIM_SRC := $(call rwildcard,shim,*.c) $(wildcard hooks/*.c)
SHIM_OBJ := $(patsubst %.c,$(B)/obj/%.o,$(SHIM_SRC))
CORE_SRC := $(call rwildcard,shim,*.c)
CORE_OBJ := $(patsubst %.c,$(B)/obj/%.o,$(CORE_SRC))
SHIMCFLAGS := $(ALLCFLAGS) -fvisibility=hidden -Ishim -pthread
UNWIND_LIBS := $(shell pkg-config --libs libunwind 2>/dev/null)
SHIM_LIBS := -ldl -lpthread -lm -lrt $(UNWIND_LIBS)
# without libunwind the shim's stacks fall back to glibc's backtrace()
SHIMCFLAGS += $(if $(UNWIND_LIBS),,-DTS_NO_LIBUNWIND)

# shim/ is compiled without -Ihooks: an include of the hook layer from below
# fails to compile.  hooks/ finds its own headers beside its sources.
$(B)/obj/shim/%.o: shim/%.c $(SHIM_HDR)
	@mkdir -p $(@D)
	$(CC) $(SHIMCFLAGS) -c -o $@ $<
$(B)/obj/hooks/%.o: hooks/%.c $(SHIM_HDR) $(HOOKS_HDR)
	@mkdir -p $(@D)
	$(CC) $(SHIMCFLAGS) -c -o $@ $<
$(B)/libtrainshim.so: $(SHIM_OBJ)
	@mkdir -p $(@D)
	$(CC) -shared -o $@ $(SHIM_OBJ) -Wl,-soname,libtrainshim.so -Wl,--no-undefined $(SHIM_LIBS) $(LDSAN)
$(B)/libtscore.a: $(CORE_OBJ)
	@mkdir -p $(@D)
	rm -f $@; ar rcs $@ $(CORE_OBJ)
shim: check-toolkit $(if $(SHIM_SRC),$(B)/libtrainshim.so $(B)/libtscore.a)

# ---------------------------------------------------------------- tools
TOOLS_SRC := $(call rwildcard,tools,*.c)
TOOLS_OBJ := $(patsubst %.c,$(B)/obj/%.o,$(TOOLS_SRC))
$(B)/obj/tools/%.o: tools/%.c $(TOOLS_HDR) $(SHIM_HDR)
	@mkdir -p $(@D)
	$(CC) $(ALLCFLAGS) -Ishim -Itools -c -o $@ $<
$(B)/trainshim: $(TOOLS_OBJ) $(if $(CORE_SRC),$(B)/libtscore.a)
	$(CC) -o $@ $(TOOLS_OBJ) $(if $(CORE_SRC),$(B)/libtscore.a) $(SHIM_LIBS) $(shell pkg-config --libs libdw 2>/dev/null) $(LDSAN)
# the HTML report's stylesheet and script are assembled into it (.incbin)
$(B)/obj/tools/html/html_page.o: tools/html/page.css tools/html/page.js
tools: $(if $(TOOLS_SRC),$(B)/trainshim)

# ---------------------------------------------------------------- test-only helpers
# The pool checker (tests/support) and the device-less page provider that
# replay uses (tools/replay/sim_provider.c): linked by unit tests and benches,
# never by libtrainshim.so.
TESTSUP_SRC := $(wildcard tests/support/*.c) tools/replay/sim_provider.c
TESTSUP_OBJ := $(patsubst %.c,$(B)/obj/%.o,$(TESTSUP_SRC))
$(B)/obj/tests/support/%.o: tests/support/%.c $(SHIM_HDR)
	@mkdir -p $(@D)
	$(CC) $(ALLCFLAGS) -Ishim -c -o $@ $<
$(B)/libtstest.a: $(TESTSUP_OBJ)
	@mkdir -p $(@D)
	rm -f $@; ar rcs $@ $(TESTSUP_OBJ)

# ---------------------------------------------------------------- tests
# C tests link against the REAL toolkit's libraries (versioned references) and
# run on the emulator through LD_LIBRARY_PATH=build/emu; emu.h comes from the
# emulated driver, hence -L$(EMU) -lcuda.
EMU_TEST_SRC   := $(wildcard tests/emu/tests/test_*.c tests/emu/tests/test_*.cu)
OTHER_TEST_SRC := $(filter-out tests/emu/%,$(wildcard tests/*/test_*.c tests/*/test_*.cu))
TEST_BIN := $(patsubst tests/emu/tests/%,$(B)/tests/emu/%,$(basename $(EMU_TEST_SRC))) \
            $(patsubst tests/%,$(B)/tests/%,$(basename $(OTHER_TEST_SRC)))
CUDA_LINK := -L$(CUDA_HOME)/lib64 -lcudart -lcublas -lcublasLt -lnccl -L$(EMU) -lcuda \
             -Wl,-rpath-link,$(CUDA_HOME)/lib64 -pthread -ldl -lm -lrt
TESTCFLAGS := $(ALLCFLAGS) -Itests/emu -Itests -Ishim -Ihooks -Itools -Wno-error=unused-parameter -pthread

$(B)/tests/emu/%: tests/emu/tests/%.c $(wildcard tests/emu/*.h tests/emu/*/*.h tests/*.h) | $(EMU_TARGETS)
	@mkdir -p $(@D)
	$(CC) $(TESTCFLAGS) -o $@ $< $(CUDA_LINK) $(LDSAN)
# the NVML test includes NVML's header
$(B)/tests/emu/test_nvml: TESTCFLAGS += -I$(B)/gen/nvml
$(B)/tests/emu/test_nvml: | $(NVML_H)
$(B)/tests/emu/%: tests/emu/tests/%.cu $(wildcard tests/emu/*.h tests/*.h) | $(EMU_TARGETS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -Itests/emu -Itests -o $@ $< -L$(CUDA_HOME)/lib64 -lcublas -lnccl -L$(EMU) -lcuda
$(B)/tests/unit/%: tests/unit/%.c $(SHIM_HDR) $(wildcard tests/*.h) $(B)/libtscore.a $(B)/libtstest.a
	@mkdir -p $(@D)
	$(CC) $(TESTCFLAGS) -o $@ $< $(B)/libtstest.a $(B)/libtscore.a $(SHIM_LIBS) $(LDSAN)
$(B)/tests/%: tests/%.c $(wildcard tests/emu/*.h tests/*.h) $(SHIM_HDR) | $(EMU_TARGETS)
	@mkdir -p $(@D)
	$(CC) $(TESTCFLAGS) -o $@ $< $(CUDA_LINK) $(LDSAN)
$(B)/tests/%: tests/%.cu $(wildcard tests/emu/*.h tests/*.h) | $(EMU_TARGETS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -Itests/emu -Itests -o $@ $< -L$(CUDA_HOME)/lib64 -lcublas -lnccl -L$(EMU) -lcuda

# tests that compile a copy-engine source into themselves
$(B)/tests/integration/test_copy_pieces: shim/copy/copy_plan.c
$(B)/tests/integration/test_copy_pool: shim/copy/copy_pool.c
$(B)/tests/unit/test_report_spans: tools/report/report_spans.c tools/report/report_spans.h
$(B)/tests/integration/test_compute_steps: tools/report/report_compute.c tools/report/report_spans.c

WORKLOAD_CU  := $(wildcard tests/workloads/*.cu)
WORKLOAD_BIN := $(patsubst tests/workloads/%.cu,$(B)/workloads/%,$(WORKLOAD_CU))
# -g: the demo report's allocation sites show file:line
$(B)/workloads/%: tests/workloads/%.cu $(wildcard tests/workloads/*.h tests/emu/emu.h) | $(EMU_TARGETS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -g -Itests/emu -o $@ $< -L$(CUDA_HOME)/lib64 -lcublas -lnccl -ldl

tests: $(TEST_BIN) $(WORKLOAD_BIN)

# ---------------------------------------------------------------- bench
BENCH_SRC := $(wildcard tests/bench/bench_*.c)
BENCH_BIN := $(patsubst tests/bench/%.c,$(B)/bench/%,$(BENCH_SRC))
$(B)/bench/%: tests/bench/%.c $(wildcard tests/emu/*.h) $(SHIM_HDR) $(B)/libtscore.a $(B)/libtstest.a | $(EMU_TARGETS)
	@mkdir -p $(@D)
	$(CC) $(TESTCFLAGS) -O2 -o $@ $< $(B)/libtstest.a $(B)/libtscore.a $(CUDA_LINK) $(SHIM_LIBS)

# ---------------------------------------------------------------- entry points
setup:
	bash scripts/setup.sh

# The repo's .clang-format applied to every product file; check-layout also
# checks the include directions (scripts/check-layout.sh says which).
PRODUCT_SRC := $(SHIM_SRC) $(SHIM_HDR) $(HOOKS_HDR) $(TOOLS_SRC) $(TOOLS_HDR)
format:
	clang-format -i $(filter %.c %.h,$(PRODUCT_SRC))
check-layout:
	bash scripts/check-layout.sh

# make test = every test, then the core and the emulator again under
# ASan+UBSan, then the concurrent parts under TSan.
ASAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined
# gcc's TSan does not model atomic_thread_fence (-Wtsan): the allocator's
# seqlock is checked under clang's TSan by tests/unit/test_alloc_tsan.sh.
TSAN_FLAGS := -fsanitize=thread -Wno-tsan
# ASan's own SIGSEGV/SIGBUS/SIGFPE/SIGABRT handlers would replace the ones the
# tests check (the shim's flush-and-chain, the emulator's fault guard).
ASAN_SIGNALS := handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_abort=0:allow_user_segv_handler=1
test: setup
	bash scripts/check-layout.sh
	$(MAKE) all
	bash tests/run.sh
	$(MAKE) san-test

# Sanitizer runs: the C test programs of tests/unit and the emulator, then a
# subset of tests/integration with the sanitized libtrainshim.so preloaded
# (the scripts take $B/libtrainshim.so, so B=$(B)/asan picks it).  A program
# that hosts a sanitized shim must itself load the sanitizer runtime first:
# the sanitized tree's C tests are instrumented, its nvcc-built programs get
# ASAN_NVCCFLAGS, and programs a script builds itself get CC with the flags
# and NVCC=tests/san/nvcc.sh.  Scripts that preload the shim into programs we
# do not build (python3, /bin/true) stay out: they would test the sanitizer.
ASAN_INTEGRATION ?= devmem_semantics devmem_streams devmem_faults devmem_capture devmem_peer devmem_multidev devmem_current_device devmem_ptds \
                    devmem_fast devmem_ipc copy_semantics copy_hostcache copy_pool copy_pieces cupti_timeline compute_cupti \
                    interpose_ demo_differential nccl_multirank log_limits nccl_accounting devmem_driver_reset
ASAN_INTEGRATION_PREFIXES := $(addprefix tests/integration/test_,$(ASAN_INTEGRATION))
# -Xcompiler splits at commas: one sanitizer per option.
ASAN_NVCCFLAGS := -Xcompiler -fsanitize=address -Xcompiler -fsanitize=undefined \
                  -Xcompiler -fno-sanitize-recover=undefined -Xlinker -lasan,-lubsan
ASAN_BIN := $(filter-out %.sh,$(patsubst $(B)/%,$(B)/asan/%,\
              $(filter $(B)/tests/unit/% $(B)/tests/emu/% $(addprefix $(B)/,$(addsuffix %,$(ASAN_INTEGRATION_PREFIXES))),$(TEST_BIN)))) \
            $(patsubst $(B)/%,$(B)/asan/%,$(WORKLOAD_BIN))
ASAN_ENV := ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0:abort_on_error=1:$(ASAN_SIGNALS) \
            UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 SAN_RUN=asan \
            CC="$(CC) $(ASAN_FLAGS)" NVCC=$(CURDIR)/tests/san/nvcc.sh TS_SAN_NVCCFLAGS="$(ASAN_NVCCFLAGS)"
SAN_SUITES ?= tests/unit/ tests/emu/test_ tests/san/ $(ASAN_INTEGRATION_PREFIXES)
# Under TSan: the concurrent parts, the integration ones with the TSan shim
# preloaded by their scripts (allocator thread caches) or by
# tests/san/preloaded.sh on the program's default mode (test_copy_semantics:
# the copy engine under threads, without the script's many runs).
# test_copy_pool is the copy helper pool under callers at once; test_devmem_ptds
# the pool's per-thread stream keys, made and dropped as threads come and go;
# test_log_clock
# the log's counter clock with several writers; test_drv_exec_copy the
# emulator's copies (DMA model, staging) across its stream workers.
TSAN_TESTS ?= tests/unit/test_log_threads tests/unit/test_log_clock tests/unit/test_process_lazy \
              tests/emu/test_drv_exec_stream tests/emu/test_drv_exec_event tests/emu/test_cupti_activity \
              tests/emu/test_cupti_gemm tests/emu/test_cupti_memset tests/emu/test_drv_core_call_counts \
              tests/emu/test_drv_exec_copy \
              tests/integration/test_devmem_fast tests/integration/test_devmem_ptds tests/integration/test_copy_pool
TSAN_PRELOADED ?= tests/integration/test_copy_semantics
TSAN_ENV := TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 SAN_RUN=tsan
san-test:
	$(MAKE) B=$(B)/asan SAN="$(ASAN_FLAGS)" OPT=-O1 NVCCFLAGS="$(NVCCFLAGS) $(ASAN_NVCCFLAGS)" emu shim tools $(ASAN_BIN)
	B=$(B)/asan $(ASAN_ENV) bash tests/run.sh $(SAN_SUITES)
	$(MAKE) B=$(B)/tsan SAN="$(TSAN_FLAGS)" OPT=-O1 emu shim $(addprefix $(B)/tsan/,$(TSAN_TESTS) $(TSAN_PRELOADED))
	B=$(B)/tsan $(TSAN_ENV) bash tests/run.sh $(TSAN_TESTS)
	for t in $(TSAN_PRELOADED); do B=$(B)/tsan $(TSAN_ENV) bash tests/san/preloaded.sh $(B)/tsan/$$t || exit 1; done

fuzz: tools
	bash tests/fuzz/run.sh $${FUZZ_SECONDS:-600}

demo: setup
	$(MAKE) all
	bash scripts/demo.sh

# a small GPT in real PyTorch under the shim (torch venv: scripts/setup-torch.sh)
demo-torch: setup
	$(MAKE) emu shim tools
	bash scripts/demo-torch.sh

bench: setup
	$(MAKE) all $(BENCH_BIN)
	bash tests/bench/run.sh

# On a GPU machine: measures with real kernels (GPU_CHECK_OUT=<dir> for the
# results); without one: builds everything and runs it on the emulator.
gpu-check: check-toolkit
	B=$(B) bash scripts/gpu-check.sh

clean:
	rm -rf $(B)
