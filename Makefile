# shoal: one Makefile, no generator.  `make` builds build/shoal and
# build/libshoal.a; `make test`, `make demo`, `make bench`, `make deps`.

CC ?= cc
PKGS := glib-2.0 gthread-2.0 gobject-2.0 gmodule-2.0 thrift_c_glib lmdb openblas zlib json-glib-1.0
BUILD := build

DEBIAN_PACKAGES := build-essential pkg-config libglib2.0-dev libthrift-c-glib-dev \
  thrift-compiler liblmdb-dev libopenblas-dev zlib1g-dev dataset-fashion-mnist \
  valgrind clang libclang-rt-14-dev python3 openmpi-bin iproute2 libjson-glib-dev gnuplot-nox \
  libpython3.11-stdlib
# libpython3.11-stdlib: /usr/lib/python3.11/*.py, the char-RNN's text (examples/char-rnn)
BENCH_PACKAGES := python3-torch python3-numpy python3-sklearn time

OPT ?= -O2 -ftree-vectorize -fvect-cost-model=dynamic -fno-trapping-math
WERROR ?= -Werror
# The version is written once, in the public header.
SHOAL_VERSION := $(shell sed -n 's/^\#define SHOAL_VERSION_STRING "\(.*\)"/\1/p' include/shoal/version.h)
SHOAL_MAJOR := $(firstword $(subst ., ,$(SHOAL_VERSION)))
# ---- sanitizers: `make SANITIZE=address,undefined test`, `make SANITIZE=thread test-threads`.
# A sanitizer build lives in its own directory (build-asan, build-tsan, ...)
# so it never mixes objects with build/; BUILD=... on the command line wins.
# Every finding is fatal (-fno-sanitize-recover): UBSan fails the test.
comma := ,
ifdef SANITIZE
  BUILD := build-$(if $(findstring thread,$(SANITIZE)),tsan,$(if $(findstring address,$(SANITIZE)),asan,$(subst $(comma),-,$(SANITIZE))))
  SAN_FLAGS := -fsanitize=$(SANITIZE) -fno-sanitize-recover=all -fno-omit-frame-pointer
  LDFLAGS += -fsanitize=$(SANITIZE)
endif

# ---- GPU: `make CUDA=1 ...` adds the CUDA backend (src/gpu: cuBLAS, cuDNN 9,
# kernels built by nvcc for sm_90 and sm_80) from CUDA_HOME.  Its objects
# differ (-DSHOAL_CUDA), so it builds in BUILD-cuda (build-cuda); BUILD=...
# on the command line wins.  Without CUDA=1 no CUDA file or header is used.
ifeq ($(CUDA),1)
  BUILD := $(BUILD)-cuda
  CUDA_HOME ?= /usr/local/cuda
  NVCC ?= $(CUDA_HOME)/bin/nvcc
  CUDA_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=sm_80
  CUDA_CFLAGS := -DSHOAL_CUDA -I$(CUDA_HOME)/include
  CUDA_LIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudnn -lcublas -lcudart -lstdc++
  # nothing below src/gpu names the backend: pull its registration out of the archive
  LDFLAGS += -Wl,-u,shoal_gpu_register
endif

CFLAGS_BASE := -std=c11 $(OPT) -g -Wall -Wextra $(WERROR) -D_GNU_SOURCE -fno-strict-aliasing -fno-math-errno \
  $(SAN_FLAGS) $(CUDA_CFLAGS) -Iinclude -Isrc -I$(BUILD)/gen

# pkg-config runs only once the packages exist (make deps may come first).
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CFLAGS_ALL = $(CFLAGS_BASE) $(PKG_CFLAGS) $(CFLAGS)
LIBS = $(PKG_LIBS) $(CUDA_LIBS) -lm -lpthread

THRIFT_IDL := $(wildcard thrift/*.thrift)
GEN_STAMP := $(BUILD)/gen/.stamp

LIB_SRC := $(wildcard src/core/*.c src/rpc/*.c src/layers/*.c src/net/*.c src/partition/*.c src/comm/*.c src/cluster/*.c \
  src/server/*.c src/worker/*.c src/data/*.c)
ifeq ($(CUDA),1)
LIB_SRC += $(wildcard src/gpu/*.c)
GPU_CU_SRC := $(wildcard src/gpu/*.cu)
GPU_CU_OBJ := $(GPU_CU_SRC:%.cu=$(BUILD)/obj/%.o)
endif
TOOL_SRC := $(wildcard src/tools/*.c)
TEST_SUPPORT_SRC := $(wildcard test/support/*.c)
TEST_SRC := $(wildcard test/test_*.c)

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
TOOL_OBJ := $(TOOL_SRC:%.c=$(BUILD)/obj/%.o)
TEST_SUPPORT_OBJ := $(TEST_SUPPORT_SRC:%.c=$(BUILD)/obj/%.o)
TEST_BIN := $(TEST_SRC:test/%.c=$(BUILD)/test/%)

.PHONY: all deps build-only test demo bench clean check-deps
all: $(BUILD)/shoal $(BUILD)/libshoal.a $(TEST_BIN) examples

build-only: all

# ---- dependencies -------------------------------------------------------
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
deps:
	@missing=""; for p in $(DEBIAN_PACKAGES) $(EXTRA_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# ---- generated Thrift code ----------------------------------------------
# Generated struct finalizers in c_glib 0.17 do not chain up to their
# parent (a leak on every object); thrift/fix-generated.awk adds the chain.
$(GEN_STAMP): $(THRIFT_IDL) thrift/fix-generated.awk
	@mkdir -p $(BUILD)/gen
	rm -f $(BUILD)/gen/*.c $(BUILD)/gen/*.h
	for f in $(THRIFT_IDL); do thrift --gen c_glib -out $(BUILD)/gen $$f || exit 1; done
	for f in $(BUILD)/gen/*.c; do awk -f thrift/fix-generated.awk $$f > $$f.tmp && mv $$f.tmp $$f; done
	touch $@

GEN_SRC = $(wildcard $(BUILD)/gen/*.c)
GEN_OBJ = $(patsubst $(BUILD)/gen/%.c,$(BUILD)/obj/gen/%.o,$(GEN_SRC))

# Generated code is not ours to fix warnings in.
$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c $(GEN_STAMP)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(OPT) -g -w $(SAN_FLAGS) $(PKG_CFLAGS) -I$(BUILD)/gen -c $< -o $@

$(BUILD)/obj/%.o: %.c $(GEN_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

-include $(LIB_OBJ:.o=.d) $(TOOL_OBJ:.o=.d) $(TEST_SUPPORT_OBJ:.o=.d) $(TEST_SRC:test/%.c=$(BUILD)/obj/test/%.d)

# CUDA kernels: nvcc, host side as strict as the C code.
NVCC_FLAGS = -std=c++17 -O2 -g $(CUDA_ARCH) -Iinclude -Isrc -Xcompiler -Wall,-Wextra$(if $(WERROR),$(comma)-Werror) \
  $(if $(WERROR),-Werror all-warnings)
$(BUILD)/obj/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -MMD -MP -c $< -o $@
-include $(GPU_CU_OBJ:.o=.d)

# GEN_OBJ is only known once the generator ran: a second make pass, and a
# shell glob (make caches directory listings from before the generator).
$(BUILD)/libshoal.a: $(LIB_OBJ) $(GPU_CU_OBJ) $(GEN_STAMP)
	@$(MAKE) --no-print-directory gen-objs
	rm -f $@
	ar rcs $@ $(LIB_OBJ) $(GPU_CU_OBJ) $(BUILD)/obj/gen/*.o

.PHONY: gen-objs
gen-objs: $(GEN_OBJ)

$(BUILD)/shoal: $(TOOL_OBJ) $(BUILD)/libshoal.a
	$(CC) $(LDFLAGS) -o $@ $(TOOL_OBJ) $(BUILD)/libshoal.a $(LIBS)

$(BUILD)/test/%: $(BUILD)/obj/test/%.o $(TEST_SUPPORT_OBJ) $(BUILD)/libshoal.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(TEST_SUPPORT_OBJ) $(BUILD)/libshoal.a $(LIBS)

# ---- examples: programs that link libshoal like an application would ----
EXAMPLE_SRC := $(wildcard examples/*/*.c)
EXAMPLE_BIN := $(EXAMPLE_SRC:examples/%.c=$(BUILD)/examples/%)
.PHONY: examples
examples: $(EXAMPLE_BIN)
$(BUILD)/examples/%: examples/%.c $(BUILD)/libshoal.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(LDFLAGS) -o $@ $< $(BUILD)/libshoal.a $(LIBS)

# ---- data ---------------------------------------------------------------
FMNIST := /usr/share/datasets/fashion-mnist
DATA := $(BUILD)/data
$(DATA)/fashion-mnist/.done: $(BUILD)/shoal
	@mkdir -p $(DATA)/fashion-mnist
	$(BUILD)/shoal import idx --images $(FMNIST)/train-images-idx3-ubyte.gz \
	  --labels $(FMNIST)/train-labels-idx1-ubyte.gz --out $(DATA)/fashion-mnist/train --force
	$(BUILD)/shoal import idx --images $(FMNIST)/t10k-images-idx3-ubyte.gz \
	  --labels $(FMNIST)/t10k-labels-idx1-ubyte.gz --out $(DATA)/fashion-mnist/test --force
	touch $@

ifdef SANITIZE
# The example confs read build/data: the plain build imports it.
data:
	@$(MAKE) --no-print-directory SANITIZE= BUILD=build data
else
data: $(DATA)/fashion-mnist/.done
endif

# ---- the two commands ---------------------------------------------------
demo: deps
	@$(MAKE) --no-print-directory all data
	$(BUILD)/shoal run examples/fashion-mnist/mlp.conf --workspace $(BUILD)/demo

test: deps
	@$(MAKE) --no-print-directory all data $(if $(SANITIZE),,fuzz-build)
	@echo '$(SANITIZE)' > $(BUILD)/sanitize
	@test/run-tests.sh $(BUILD)

bench: deps
	@$(MAKE) --no-print-directory EXTRA_PACKAGES="$(BENCH_PACKAGES)" deps
	@$(MAKE) --no-print-directory all data
	@status=0; \
	for b in run.sh rpc.sh sandblaster.sh partition.sh spread.sh rnn.sh rbm.sh; do \
	  echo "==== bench/$$b"; bash bench/$$b $(BUILD) || status=1; \
	done; exit $$status

# includes and calls point down the layers of src/ (docs/ARCHITECTURE.md)
.PHONY: check-layers
check-layers: all
	@scripts/check-layers.sh $(BUILD)

clean:
	rm -rf $(BUILD)

# ---- sanitizer and fuzzing targets ----------------------------------------
# `make SANITIZE=thread test-threads`: the tests that start threads, under
# TSan.  GLib's GMutex/GCond are futexes TSan cannot see;
# test/sanitizers/tsan_glib.c tells TSan about every lock, unlock, wait and
# queue hand-over made from shoal's code (no suppressions needed).
THREAD_TESTS ?= test_data|test_server|test_rpc|test_group_wire|test_partition|test_runner|test_worker|test_param|e2e_tsan_
ifneq ($(findstring thread,$(SANITIZE)),)
SAN_OBJ := $(BUILD)/obj/test/sanitizers/tsan_glib.o
LIBS += $(SAN_OBJ)
$(TEST_BIN) $(BUILD)/shoal $(EXAMPLE_BIN): $(SAN_OBJ)
endif
.PHONY: test-threads
test-threads: deps
	@test -n "$(findstring thread,$(SANITIZE))" || { echo "usage: make SANITIZE=thread test-threads"; exit 2; }
	@$(MAKE) --no-print-directory all data
	@echo '$(SANITIZE)' > $(BUILD)/sanitize
	@test/run-tests.sh $(BUILD) '$(THREAD_TESTS)'

# `make fuzz`: libFuzzer targets fuzz/fuzz_*.c built with clang, ASan and
# UBSan into build-fuzz/, each run FUZZ_SECONDS from its seed corpus
# fuzz/corpus/NAME (new inputs go to build-fuzz/corpus/NAME, crashes to
# build-fuzz/crashes/).  test/e2e/fuzz_smoke.sh runs each 10 s in `make test`.
# -Werror is gcc's contract; clang only warns here (and ignores gcc's pragmas).
FUZZ_BUILD := build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_SRC := $(wildcard fuzz/fuzz_*.c)
FUZZ_BIN := $(FUZZ_SRC:fuzz/%.c=$(BUILD)/fuzz/%)
.PHONY: fuzz fuzz-build fuzz-bins
fuzz-build:
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CUDA= CC=clang OPT='-O1 -fno-trapping-math' WERROR= \
	  CFLAGS=-Wno-unknown-pragmas SANITIZE=fuzzer-no-link,address,undefined fuzz-bins
fuzz: deps
	@$(MAKE) --no-print-directory fuzz-build
	@fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)
fuzz-bins: $(FUZZ_BIN)
$(BUILD)/fuzz/%: $(BUILD)/obj/fuzz/%.o $(BUILD)/libshoal.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $< $(BUILD)/libshoal.a $(LIBS)
-include $(FUZZ_SRC:fuzz/%.c=$(BUILD)/obj/fuzz/%.d)
