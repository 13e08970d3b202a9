# sinkgate build.  `make` builds build/sgtrain (CPU backend, no CUDA needed).
#
#   make            sgtrain and the tools
#   make test       unit, reference and end-to-end tests, then the ASan/UBSan build of the unit tests
#   make bench      CPU benchmarks (figures for docs/performance.md)
#   make fuzz       coverage-guided fuzzing of every input parser (clang's libFuzzer; docs/fuzzing.md)
#   make data       GPT-2 vocabulary, demo and test corpora, demo shards (docs/data.md)
#
# Dependencies are found with pkg-config or a compile probe, never fixed paths:
#   BLAS   BLAS=auto|openblas|blis|mkl|cblas (auto: the fastest installed, by measurement;
#          MKL comes from PyPI's wheels into build/deps/mkl: tools/fetch-mkl.sh)
#   libyaml (yaml-0.1), json-c, zlib, PCRE2 (libpcre2-8), OpenSSL libcrypto

CC      ?= cc
OPT     ?= -O3 -march=native
CSTD    := -std=c11 -D_GNU_SOURCE
WARN    := -Wall -Wextra -Wno-unused-parameter
# -fno-math-errno: nothing reads errno after a math call, and with it sqrtf
# is one instruction that vectorizes (AdamW's loop was scalar without it)
CFLAGS  += $(CSTD) $(OPT) $(WARN) -fno-math-errno -fopenmp -MMD -MP -Isrc -Ikernels
LDLIBS  += -lm -fopenmp
B       := build
.DEFAULT_GOAL := all

PKG_CONFIG ?= pkg-config
BLAS ?= auto

# --- BLAS: chosen by measurement ------------------------------------------
# BLAS=auto builds tools/blas_probe against every BLAS installed, times the
# GEMM shapes of a training step, and links the fastest (cached in
# $(B)/blas.choice; figures in $(B)/blas-probe.txt; `rm` it to re-probe).
# On CPUs newer than the installed OpenBLAS, its autodetection falls back to
# generic kernels unless OPENBLAS_CORETYPE names the core: the probe sees
# exactly what training will.
blis_dir := $(firstword $(wildcard /usr/include/*/blis-openmp /usr/include/blis))
MKL_DIR  ?= build/deps/mkl
ifeq ($(BLAS),auto)
  BLAS := $(shell cat $(B)/blas.choice 2>/dev/null || CC=$(CC) PKG_CONFIG=$(PKG_CONFIG) MKL_DIR=$(MKL_DIR) sh tools/blas_probe/choose.sh $(B))
endif
ifeq ($(BLAS),openblas)
  BLAS_CFLAGS := $(shell $(PKG_CONFIG) --cflags openblas)
  BLAS_LIBS   := $(shell $(PKG_CONFIG) --libs openblas)
else ifeq ($(BLAS),blis)
  BLAS_CFLAGS := -isystem $(blis_dir) -DSG_BLAS_BLIS
  BLAS_LIBS   := -L$(subst include,lib,$(blis_dir)) -Wl,-rpath,$(subst include,lib,$(blis_dir)) -lblis
else ifeq ($(BLAS),mkl)
  BLAS_CFLAGS := -isystem $(MKL_DIR)/include -DSG_BLAS_MKL
  BLAS_LIBS   := -L$(abspath $(MKL_DIR)/lib) -Wl,-rpath,$(abspath $(MKL_DIR)/lib) -lmkl_intel_lp64 -lmkl_gnu_thread -lmkl_core -lm -ldl -lpthread
else ifeq ($(BLAS),cblas)
  BLAS_LIBS   := -lcblas -lblas
else
  $(error BLAS=$(BLAS): expected auto, openblas, blis, mkl or cblas)
endif
CFLAGS += $(BLAS_CFLAGS) -DSG_BLAS_NAME=\"$(BLAS)\"
LDLIBS += $(BLAS_LIBS)

# --- libyaml ---------------------------------------------------------------
YAML_LIBS := $(shell $(PKG_CONFIG) --libs yaml-0.1 2>/dev/null)
ifeq ($(YAML_LIBS),)
  $(error libyaml not found (pkg-config yaml-0.1). Install it: apt-get install libyaml-dev)
endif
CFLAGS += $(shell $(PKG_CONFIG) --cflags yaml-0.1)
LDLIBS += $(YAML_LIBS)

# --- json-c (safetensors headers), zlib (checkpoint CRC) ---------------------
JSON_LIBS := $(shell $(PKG_CONFIG) --libs json-c zlib 2>/dev/null)
ifeq ($(JSON_LIBS),)
  $(error json-c or zlib not found (pkg-config json-c zlib). Install them: apt-get install libjson-c-dev zlib1g-dev)
endif
CFLAGS += $(shell $(PKG_CONFIG) --cflags json-c zlib)
LDLIBS += $(JSON_LIBS)

# --- PCRE2 (GPT-2's pre-tokenizer pattern), OpenSSL libcrypto (SHA-256, base64) ---
TOK_LIBS := $(shell $(PKG_CONFIG) --libs libpcre2-8 libcrypto 2>/dev/null)
ifeq ($(TOK_LIBS),)
  $(error PCRE2 or OpenSSL not found (pkg-config libpcre2-8 libcrypto). Install them: apt-get install libpcre2-dev libssl-dev)
endif
CFLAGS += $(shell $(PKG_CONFIG) --cflags libpcre2-8 libcrypto)
LDLIBS += $(TOK_LIBS)

# --- MPI (data parallelism): MPI=auto|yes|no; auto uses Open MPI when pkg-config finds it
MPI ?= auto
MPI_PC := $(shell $(PKG_CONFIG) --exists ompi-c 2>/dev/null && echo ompi-c)
ifeq ($(MPI),yes)
  ifeq ($(MPI_PC),)
    $(error MPI=yes but Open MPI is not found (pkg-config ompi-c). Install it: apt-get install libopenmpi-dev)
  endif
endif
ifneq ($(MPI),no)
  ifneq ($(MPI_PC),)
    MPI_CFLAGS := -DSG_MPI $(shell $(PKG_CONFIG) --cflags $(MPI_PC))
    MPI_LIBS   := $(shell $(PKG_CONFIG) --libs $(MPI_PC))
  endif
endif
CFLAGS += $(MPI_CFLAGS)
LDLIBS += $(MPI_LIBS)

# --- sources ---------------------------------------------------------------
LIB_SRC  := $(filter-out src/main.c src/dist_nccl.c,$(wildcard src/*.c)) $(wildcard kernels/cpu/*.c)
MAIN_SRC := src/main.c
TEST_SRC := $(wildcard tests/test_*.c)     # float build
DTEST_SRC:= $(wildcard tests/dtest_*.c)    # double build (gradient checks, twin)
TOOL_SRC := $(wildcard tools/*.c)
BENCH_SRC:= $(wildcard tests/bench/*.c)

obj = $(patsubst %.c,$(B)/$(2)/%.o,$(1))

LIB_F   := $(B)/libsg.a
LIB_D   := $(B)/libsg_d.a
LIB_SAN := $(B)/libsg_san.a

TESTS_F   := $(patsubst tests/%.c,$(B)/tests/%,$(TEST_SRC))
TESTS_D   := $(patsubst tests/%.c,$(B)/tests/%,$(DTEST_SRC))
TESTS_SAN := $(patsubst tests/%.c,$(B)/san/tests/%,$(TEST_SRC) $(DTEST_SRC))
TOOLS     := $(patsubst tools/%.c,$(B)/%,$(TOOL_SRC))
BENCHES   := $(patsubst tests/bench/%.c,$(B)/bench/%,$(BENCH_SRC))
FUZZ_SRC  := $(wildcard tests/fuzz/fuzz_*.c)
# the fuzz targets, each linked to replay.c under ASan/UBSan: make test runs
# them over their corpora (tests/fuzz/run.sh replay)
FUZZ_REPLAY := $(patsubst tests/fuzz/%.c,$(B)/san/fuzz/%,$(FUZZ_SRC))

SAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

# Objects depend on the BLAS they were compiled for: switching BLAS (or a
# new probe result) rebuilds everything.
STAMP := $(B)/.blas-$(BLAS)
$(STAMP):
	@mkdir -p $(B); rm -f $(B)/.blas-*; touch $@

.PHONY: all test test-fast bench fuzz fuzz-targets fixtures clean data cuda test-gpu bench-gpu sanitize-gpu
.PRECIOUS: $(B)/f/%.o $(B)/d/%.o $(B)/s/%.o $(B)/sd/%.o $(B)/z/%.o
all: $(B)/sgtrain $(TOOLS)

$(B)/f/%.o: %.c $(STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@
$(B)/d/%.o: %.c $(STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DSG_DOUBLE -c $< -o $@
$(B)/s/%.o: %.c $(STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN_FLAGS) -c $< -o $@
$(B)/sd/%.o: %.c $(STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN_FLAGS) -DSG_DOUBLE -c $< -o $@

$(LIB_F): $(call obj,$(LIB_SRC),f)
	@rm -f $@; ar rcs $@ $^
$(LIB_D): $(call obj,$(LIB_SRC),d)
	@rm -f $@; ar rcs $@ $^
$(LIB_SAN): $(call obj,$(LIB_SRC),s)
	@rm -f $@; ar rcs $@ $^
$(B)/libsg_sand.a: $(call obj,$(LIB_SRC),sd)
	@rm -f $@; ar rcs $@ $^

$(B)/sgtrain: $(B)/f/src/main.o $(LIB_F)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
$(B)/%: $(B)/f/tools/%.o $(LIB_F)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
# a tool of several files keeps the rest in tools/NAME/
$(B)/sgsweep: $(B)/f/tools/sgsweep.o $(call obj,$(wildcard tools/sgsweep/*.c),f) $(LIB_F)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(B)/tests/test_%: $(B)/f/tests/test_%.o $(B)/f/tests/check.o $(LIB_F)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
$(B)/tests/dtest_%: $(B)/d/tests/dtest_%.o $(B)/d/tests/check.o $(LIB_D)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DSG_DOUBLE $^ -o $@ $(LDLIBS)
$(B)/san/tests/test_%: $(B)/s/tests/test_%.o $(B)/s/tests/check.o $(LIB_SAN)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN_FLAGS) $^ -o $@ $(LDLIBS)
$(B)/san/tests/dtest_%: $(B)/sd/tests/dtest_%.o $(B)/sd/tests/check.o $(B)/libsg_sand.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN_FLAGS) -DSG_DOUBLE $^ -o $@ $(LDLIBS)
$(B)/bench/%: $(B)/f/tests/bench/%.o $(LIB_F)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
$(B)/san/fuzz/fuzz_%: $(B)/s/tests/fuzz/fuzz_%.o $(B)/s/tests/fuzz/replay.o $(LIB_SAN)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN_FLAGS) $^ -o $@ $(LDLIBS)

# The whole suite: unit tests (float and double), the end-to-end CLI tests,
# then every unit test again under ASan/UBSan.  tests/run.sh prints the
# closing "N passed, N failed" line.
test: all $(TESTS_F) $(TESTS_D) $(TESTS_SAN) $(FUZZ_REPLAY)
	@bash tests/run.sh $(B)
test-fast: all $(TESTS_F) $(TESTS_D)
	@SG_NO_SAN=1 bash tests/run.sh $(B)

bench: all $(BENCHES)
	@bash tests/bench/run.sh $(B)

# --- fuzzing: make fuzz [FUZZ_TIME=seconds per target] [FUZZ_TARGETS="config sweep ..."]
# The same targets built with clang's libFuzzer (coverage-guided), over a
# library compiled with clang and ASan/UBSan into $(B)/z; the corpora grow
# in $(B)/fuzz/corpus and crashes land in $(B)/fuzz/crashes (docs/fuzzing.md).
FUZZ_CC    ?= clang
FUZZ_TIME  ?= 60
FUZZ_FLAGS := -O1 -g -Wno-pass-failed -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
FUZZ_BINS  := $(patsubst tests/fuzz/%.c,$(B)/fuzz/%,$(FUZZ_SRC))
ifneq ($(filter fuzz fuzz-targets $(B)/fuzz/%,$(MAKECMDGOALS)),)
  ifeq ($(shell command -v $(FUZZ_CC) 2>/dev/null),)
    $(error make fuzz needs clang with libFuzzer and libomp: apt-get install clang libclang-rt-14-dev libomp-dev)
  endif
endif
$(B)/z/%.o: %.c $(STAMP)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CFLAGS) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -c $< -o $@
$(B)/libsg_fuzz.a: $(call obj,$(LIB_SRC),z)
	@rm -f $@; ar rcs $@ $^
$(B)/fuzz/fuzz_%: $(B)/z/tests/fuzz/fuzz_%.o $(B)/libsg_fuzz.a
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CFLAGS) $(FUZZ_FLAGS) -fsanitize=fuzzer $^ -o $@ $(LDLIBS)
fuzz-targets: $(FUZZ_BINS)
fuzz: all fuzz-targets
	@bash tests/fuzz/run.sh fuzz $(B) $(FUZZ_TIME) $(FUZZ_TARGETS)

# --- CUDA backend: make cuda -> build/cuda/sgtrain --------------------------
# The same host code (src/) over the CUDA ops (kernels/cuda/); needs only the
# toolkit (nvcc, cudart, cuBLASLt) to build, no GPU and no driver library.
# CUDA_ARCHS: A100 (80), H100/H200 (90), RTX 5090 (120), as SASS.
# CUDA_PTX: the virtual architecture whose PTX goes beside them, so that a
# GPU none of those runs (a B200, sm_100: SASS runs only within its major
# version) compiles the kernels as it loads them instead of stopping with
# "no kernel image": 80, which every GPU from sm_80 on takes (the kernels
# use nothing later: cp.async, ldmatrix, mma.sync).  Empty: no PTX.
comma      := ,
NVCC       ?= nvcc
CUDA_ARCHS ?= 80 90 120
CUDA_PTX   ?= 80
CUDA_HOME  ?= $(patsubst %/bin/,%,$(dir $(shell command -v $(NVCC) 2>/dev/null)))
CB         := $(B)/cuda
NVCCFLAGS  := -std=c++17 -O3 -lineinfo -Xcompiler -Wall,-Wextra -Ikernels -Ikernels/cuda -Isrc \
              $(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(a),code=sm_$(a)) \
              $(if $(CUDA_PTX),-gencode arch=compute_$(CUDA_PTX)$(comma)code=compute_$(CUDA_PTX))
CUDA_CFLAGS := $(CSTD) $(OPT) $(WARN) -fopenmp -MMD -MP -Isrc -Ikernels -DSG_BLAS_NAME=\"cublasLt\" $(MPI_CFLAGS) \
              $(shell $(PKG_CONFIG) --cflags yaml-0.1 json-c zlib libpcre2-8 libcrypto)

# --- NCCL (the CUDA build's gradient sums between GPUs): NCCL=auto|yes|no ---
# It needs MPI as well, which carries NCCL's unique id from rank 0 to the
# others.  auto uses NCCL when a compile-and-link probe finds nccl.h and
# libnccl in the toolkit's include and library directories or in the
# compiler's default paths; yes fails without it.  Built without NCCL, the
# CUDA build refuses to run as several ranks (src/dist.c).  \043 is '#':
# make would read it as a comment.
NCCL ?= auto
NCCL_FOUND :=
ifneq ($(NCCL),no)
  ifneq ($(and $(CUDA_HOME),$(MPI_CFLAGS)),)
    NCCL_FOUND := $(shell printf '\043include <nccl.h>\nint main(void) { int v; return ncclGetVersion(&v) != ncclSuccess; }\n' | \
                    $(CC) -x c - -isystem $(CUDA_HOME)/include -L$(CUDA_HOME)/lib64 -lnccl -o /dev/null >/dev/null 2>&1 && echo yes)
  endif
  ifeq ($(NCCL)$(NCCL_FOUND),yes)
    $(error NCCL=yes but the probe found no NCCL (nccl.h and libnccl under CUDA_HOME=$(CUDA_HOME) or in the \
            compiler's paths; nvcc must be on PATH) or no MPI to start it (pkg-config ompi-c). Install NCCL \
            (apt-get install libnccl-dev, or the toolkit's) and libopenmpi-dev)
  endif
endif
ifeq ($(NCCL_FOUND),yes)
  CUDA_CFLAGS += -DSG_NCCL
  NCCL_LIBS   := -lnccl
endif
# host objects depend on whether SG_NCCL was defined: switching rebuilds them
NCCL_STAMP := $(CB)/.nccl-$(if $(NCCL_FOUND),yes,no)
$(NCCL_STAMP):
	@mkdir -p $(CB); rm -f $(CB)/.nccl-*; touch $@

CUDA_LDLIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 $(NCCL_LIBS) -lcublasLt -lcublas -lcudart -lstdc++ \
              -ldl -lm -fopenmp $(YAML_LIBS) $(JSON_LIBS) $(TOK_LIBS) $(MPI_LIBS)
CUDA_CU    := $(wildcard kernels/cuda/*.cu)
CUDA_HOSTC := $(filter-out src/main.c $(if $(NCCL_FOUND),,src/dist_nccl.c),$(wildcard src/*.c))
CUDA_OBJS  := $(patsubst %.cu,$(CB)/cu/%.o,$(CUDA_CU)) $(patsubst %.c,$(CB)/c/%.o,$(CUDA_HOSTC)) \
              $(CB)/cu/kernels/cuda/cudnn_sdpa.o

# --- cuDNN (SG_ATTN=cudnn's fused attention): CUDNN=auto|yes|no -------------
# kernels/cuda/cudnn_sdpa.cpp is host C++ over the cuDNN frontend, a
# header-only library that tools/fetch-cudnn-frontend.sh takes from PyPI
# (pinned) into build/deps, and cuDNN's own headers (cudnn_graph.h, with the
# toolkit or in the compiler's paths).  libcudnn itself is opened at run time,
# so the binary starts without it.  auto builds with cuDNN when both header
# sets are there, else without (SG_ATTN=cudnn then says so and runs the mma
# tiles); yes stops without them.  $(CB)/cudnn.choice records the outcome.
CUDNN      ?= auto
ifeq ($(filter $(CUDNN),auto yes no),)
  $(error CUDNN must be auto, yes or no (not "$(CUDNN)"))
endif
CFE_DIR    := $(B)/deps/cudnn-frontend
CUDNN_STAMP := $(CB)/.cudnn-$(CUDNN)
$(CUDNN_STAMP):
	@mkdir -p $(CB); rm -f $(CB)/.cudnn-*; touch $@
CUDNN_CXXFLAGS := -std=c++17 -O2 -Wall -Wextra -MMD -MP -Ikernels -Ikernels/cuda -Isrc -isystem $(CUDA_HOME)/include
$(CB)/cu/kernels/cuda/cudnn_sdpa.o: kernels/cuda/cudnn_sdpa.cpp tools/fetch-cudnn-frontend.sh $(CUDNN_STAMP)
	@mkdir -p $(dir $@)
	@if [ "$(CUDNN)" != no ]; then bash tools/fetch-cudnn-frontend.sh $(CFE_DIR); fi
	@hdr=no; for d in $(CUDA_HOME)/include /usr/include /usr/include/x86_64-linux-gnu; do \
	    [ -f $$d/cudnn_graph.h ] && hdr=yes; done; \
	if [ "$(CUDNN)" != no ] && [ $$hdr = yes ] && [ -f $(CFE_DIR)/include/cudnn_frontend.h ]; then \
	    echo yes > $(CB)/cudnn.choice; \
	    echo "$(CXX) $(CUDNN_CXXFLAGS) -DSG_CUDNN ... -c $< -o $@"; \
	    $(CXX) $(CUDNN_CXXFLAGS) -DSG_CUDNN -DNV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING -isystem $(CFE_DIR)/include \
	        -c $< -o $@; \
	elif [ "$(CUDNN)" = yes ]; then \
	    echo "CUDNN=yes, but cuDNN's headers (cudnn_graph.h: $$hdr) or the frontend's ($(CFE_DIR): PyPI) are missing" >&2; \
	    exit 1; \
	else \
	    echo no > $(CB)/cudnn.choice; \
	    $(CXX) $(CUDNN_CXXFLAGS) -c $< -o $@; \
	fi
$(patsubst %.c,$(CB)/c/%.o,$(CUDA_HOSTC) src/main.c): $(NCCL_STAMP)
# the CUDA runtime's C API for src/dist_nccl.c (nccl.h includes it)
$(CB)/c/src/dist_nccl.o: CUDA_CFLAGS += -isystem $(CUDA_HOME)/include

# Device code depends on the architectures it was compiled for: changing
# CUDA_ARCHS recompiles it (as the BLAS stamp does for the CPU objects).
empty :=
space := $(empty) $(empty)
ARCH_STAMP := $(CB)/.archs-$(subst $(space),-,$(strip $(CUDA_ARCHS)))-ptx$(strip $(CUDA_PTX))
$(ARCH_STAMP):
	@mkdir -p $(CB); rm -f $(CB)/.archs-*; touch $@
# The warpgroup kernels (wgmma_ptx.h) need sm_90a, Hopper's own target,
# in place of sm_90: wgmma exists nowhere else (their other targets trap,
# and are never launched).
WGMMA_CU := kernels/cuda/attention_fwd_wgmma.cu kernels/cuda/attention_bwd_mma.cu
$(patsubst %.cu,$(CB)/cu/%.o,$(WGMMA_CU)): NVCCFLAGS := $(subst arch=compute_90$(comma)code=sm_90,arch=compute_90a$(comma)code=sm_90a,$(NVCCFLAGS))
$(patsubst %.cu,$(CB)/cu/%.o,$(WGMMA_CU)): kernels/cuda/wgmma_ptx.h kernels/cuda/attention_fwd_tile.h
$(CB)/cu/%.o: %.cu kernels/cuda/cuda_common.h kernels/ops.h $(ARCH_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -c $< -o $@
$(CB)/c/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CUDA_CFLAGS) -c $< -o $@
$(CB)/libsg_cuda.a: $(CUDA_OBJS)
	@rm -f $@; ar rcs $@ $^
$(CB)/sgtrain: $(CB)/c/src/main.o $(CB)/libsg_cuda.a
	$(CC) $(CUDA_CFLAGS) $^ -o $@ $(CUDA_LDLIBS)

# GPU tests: every CUDA op against the CPU op (the CPU kernels are linked in
# a second time with their op_ names prefixed cpu_, tests/gpu/cpu_names.h).
GPU_CPU_OBJS := $(patsubst %.c,$(CB)/ref/%.o,$(wildcard kernels/cpu/*.c))
$(CB)/ref/%.o: %.c $(STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -include tests/gpu/cpu_names.h -c $< -o $@
$(CB)/tg/%.o: tests/gpu/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CUDA_CFLAGS) -Itests -Itests/gpu -c $< -o $@
$(CB)/tg/table_cpu.o: tests/gpu/table_cpu.c
	@mkdir -p $(dir $@)
	$(CC) $(CUDA_CFLAGS) -include tests/gpu/cpu_names.h -Itests/gpu -c $< -o $@
$(CB)/tg/check.o: tests/check.c
	@mkdir -p $(dir $@)
	$(CC) $(CUDA_CFLAGS) -c $< -o $@
# test_gpu_ops: its main, one file of cases per op group, the op tables
GPU_TEST_OBJS := $(patsubst tests/gpu/%.c,$(CB)/tg/%.o,tests/gpu/test_gpu_ops.c $(wildcard tests/gpu/gpu_ops_*.c)) \
                 $(CB)/tg/table_gpu.o $(CB)/tg/table_cpu.o $(CB)/tg/check.o
$(CB)/test_gpu_ops: $(GPU_TEST_OBJS) $(GPU_CPU_OBJS) $(CB)/libsg_cuda.a
	$(CC) $(CUDA_CFLAGS) $^ -o $@ $(CUDA_LDLIBS) $(BLAS_LIBS)
$(CB)/bench_gpu: $(CB)/tg/bench_gpu.o $(CB)/libsg_cuda.a
	$(CC) $(CUDA_CFLAGS) $^ -o $@ $(CUDA_LDLIBS)

# cuDNN's verdict on the attention graphs sgtrain asks for, for GPUs this
# machine lacks (tests/cudnn/plan_check.cpp; tests/e2e_cuda_build.sh runs it)
$(CB)/cudnn_plan_check: tests/cudnn/plan_check.cpp tests/cudnn/sdpa_line.h kernels/cuda/cudnn_sdpa.h \
                        kernels/cuda/scratch.h $(CB)/cu/kernels/cuda/cudnn_sdpa.o
	$(CXX) -std=c++17 -O2 -Wall -Wextra -Ikernels -Ikernels/cuda -Itests/cudnn -isystem $(CUDA_HOME)/include \
	    $< $(CB)/cu/kernels/cuda/cudnn_sdpa.o -o $@ -ldl

# Hopper's warpgroup products probed on the device (tests/gpu/wgmma_probe.cu):
# sm_90a only, whatever CUDA_ARCHS says, since wgmma exists nowhere else
$(CB)/wgmma_probe: tests/gpu/wgmma_probe.cu kernels/cuda/wgmma_ptx.h
	@mkdir -p $(dir $@)
	$(NVCC) -std=c++17 -O3 -lineinfo -Xcompiler -Wall,-Wextra -Ikernels/cuda -gencode arch=compute_90a,code=sm_90a $< -o $@

cuda: $(CB)/sgtrain $(CB)/test_gpu_ops $(CB)/bench_gpu $(CB)/cudnn_plan_check $(CB)/wgmma_probe
test-gpu: cuda all
	bash tests/gpu/run.sh $(B)
sanitize-gpu: cuda all
	bash tests/gpu/sanitize.sh $(B)
bench-gpu: cuda all
	bash tests/gpu/bench.sh $(B)

# GPT-2's vocabulary (PyPI), the demo and tokenizer-test corpora (Debian
# packages) and the demo shards: docs/data.md.  Downloads are cached in $(B)/dl.
data: $(B)/sgtok
	SGTOK=$(B)/sgtok DATA=data DL=$(B)/dl bash tools/fetch-data.sh

# Regenerate the PyTorch-twin fixtures and the Hugging Face GPT-2 and GPT-NeoX ones
# (need torch and transformers; CI does not).
fixtures:
	python3 tests/twin/make_fixtures.py tests/fixtures
	python3 tests/import/make_hf_fixture.py tests/fixtures/hf_gpt2
	python3 tests/import/make_neox_fixture.py tests/fixtures/hf_neox

clean:  # keeps what was downloaded: build/deps (MKL), build/dl (data sources), build/venv (tiktoken)
	find $(B) -mindepth 1 -maxdepth 1 ! -name deps ! -name dl ! -name venv -exec rm -rf {} +

-include $(shell find $(B) -name '*.d' 2>/dev/null)
