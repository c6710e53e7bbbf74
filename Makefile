# shoal: one Makefile, no generator.  `make` builds build/shoal,
# build/libshoal.so.MAJOR (and its links) and build/libshoal.a; `make test`,
# `make demo`, `make bench`, `make deps`, `make install` (PREFIX, DESTDIR),
# `make uninstall`.

CC ?= cc
PKGS := glib-2.0 gthread-2.0 gobject-2.0 gmodule-2.0 thrift_c_glib lmdb openblas zlib json-glib-1.0 openssl
BUILD := build

DEBIAN_PACKAGES := build-essential pkg-config libglib2.0-dev libthrift-c-glib-dev \
  thrift-compiler liblmdb-dev libopenblas-dev zlib1g-dev dataset-fashion-mnist \
  valgrind clang libclang-rt-14-dev libtsan2 python3 openmpi-bin iproute2 util-linux \
  libjson-glib-dev gnuplot-nox help2man libpython3.11-stdlib python3-thrift python3-lmdb libssl-dev \
  slurm-wlm munge iptables libnetfilter-queue-dev libsoup-3.0-dev libjs-chart.js chromium curl abigail-tools
# libpython3.11-stdlib: /usr/lib/python3.11/*.py, the char-RNN's text (examples/char-rnn)
# abigail-tools: abidw/abidiff, the public ABI against its soname's baseline (test/e2e/abi.sh)
# libssl-dev: OpenSSL 3, TLS on the links between hosts (src/rpc/tls.c, docs/SECURITY.md)
# slurm-wlm, munge: a one-node Slurm that test/e2e/slurm.sh starts in a temporary directory
# iptables: packet loss and partitions between namespaces (test/e2e/netns_chaos.sh)
# libnetfilter-queue-dev: the latency fault's packet delayer where the kernel has no sch_netem
# (test/e2e/lib/delay_queue.c, built by test/e2e/netns_chaos.sh under make chaos)
# libsoup-3.0-dev, libjs-chart.js: `shoal serve`'s HTTP server and the charting library its page
# loads (src/dashboard); chromium, curl: the headless browser its test loads the page in, and
# the HTTP client of its token checks
# python3-thrift, python3-lmdb: Apache Thrift's own Python client against shoal's server
# (test_rpc), datasets written and read by Python (examples/python-dataset)
BENCH_PACKAGES := python3-torch python3-numpy python3-sklearn time

OPT ?= -O2 -ftree-vectorize -fvect-cost-model=dynamic -fno-trapping-math
WERROR ?= -Werror
# The version is written once, in the public header.
SHOAL_VERSION := $(shell sed -n 's/^\#define SHOAL_VERSION_STRING "\(.*\)"/\1/p' include/shoal/version.h)
SHOAL_MAJOR := $(firstword $(subst ., ,$(SHOAL_VERSION)))

# ---- where `make install` puts things (docs/LIBRARY.md) -------------------
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
DATADIR ?= $(PREFIX)/share
MANDIR ?= $(DATADIR)/man
DOCDIR ?= $(DATADIR)/doc/shoal
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
# where `shoal run --plugin NAME` looks after SHOAL_PLUGIN_PATH (compiled in)
PLUGINDIR ?= $(LIBDIR)/shoal/plugins
# the dashboard's page (src/dashboard/web), and Debian's Chart.js it serves
DASHBOARDDIR ?= $(DATADIR)/shoal/dashboard
CHARTJS ?= /usr/share/javascript/chart.js/chart.min.js
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

# Every object is position-independent: the same objects make libshoal.so
# and libshoal.a.  -fno-semantic-interposition lets the compiler call and
# inline the library's own functions directly within a file, and the .so
# links with -Bsymbolic-functions so calls between its files bind inside
# it too: no PLT hop on internal calls (bench/README.md has the A/B).
PIC := -fPIC -fno-semantic-interposition
CFLAGS_BASE := -std=c11 $(OPT) -g -Wall -Wextra $(WERROR) -D_GNU_SOURCE -fno-strict-aliasing -fno-math-errno \
  $(PIC) $(SAN_FLAGS) $(CUDA_CFLAGS) -Iinclude -Isrc -I$(BUILD)/gen

# pkg-config runs only once the packages exist (make deps may come first).
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CFLAGS_ALL = $(CFLAGS_BASE) $(PKG_CFLAGS) $(CFLAGS)
LIBS = $(PKG_LIBS) $(CUDA_LIBS) -lm -lpthread

# Stamps: a file whose content is what its dependents were built with,
# rewritten (so newer) only when that changes (their rules are at the end
# of this Makefile): objects depend on the compile flags; plugin.o, shoal.pc
# and the shoal binary on the install layout.
FLAGS_STAMP := $(BUILD)/.flags
LAYOUT_STAMP := $(BUILD)/.layout
# shoal's RUNPATH to its installed library: $ORIGIN/../lib by default
BIN_TO_LIB := $(shell realpath -m --relative-to='$(BINDIR)' '$(LIBDIR)')

THRIFT_IDL := $(wildcard thrift/*.thrift)
GEN_STAMP := $(BUILD)/gen/.stamp

LIB_SRC := $(wildcard src/core/*.c src/rpc/*.c src/layers/*.c src/net/*.c src/partition/*.c src/comm/*.c src/cluster/*.c \
  src/server/*.c src/metrics/*.c src/workspace/*.c src/job/*.c src/worker/*.c src/emulate/*.c src/run/*.c src/data/*.c)
ifeq ($(CUDA),1)
LIB_SRC += $(wildcard src/gpu/*.c)
GPU_CU_SRC := $(wildcard src/gpu/*.cu)
GPU_CU_OBJ := $(GPU_CU_SRC:%.cu=$(BUILD)/obj/%.o)
endif
TOOL_SRC := $(wildcard src/tools/*.c)
# the dashboard (shoal serve) is the binary's, not the library's: only it needs libsoup
DASHBOARD_SRC := $(wildcard src/dashboard/*.c)
DASHBOARD_WEB := $(wildcard src/dashboard/web/*)
TEST_SUPPORT_SRC := $(wildcard test/support/*.c)
TEST_SRC := $(wildcard test/test_*.c)

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
TOOL_OBJ := $(TOOL_SRC:%.c=$(BUILD)/obj/%.o) $(DASHBOARD_SRC:%.c=$(BUILD)/obj/%.o)
TEST_SUPPORT_OBJ := $(TEST_SUPPORT_SRC:%.c=$(BUILD)/obj/%.o)
TEST_BIN := $(TEST_SRC:test/%.c=$(BUILD)/test/%)

.PHONY: all deps build-only test demo bench clean check-deps
all: $(BUILD)/shoal $(BUILD)/dashboard/.stamp $(BUILD)/libshoal.so $(BUILD)/libshoal.a $(BUILD)/pkgconfig/shoal.pc $(TEST_BIN) examples

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
$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c $(GEN_STAMP) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(OPT) -g -w $(PIC) $(SAN_FLAGS) $(PKG_CFLAGS) -I$(BUILD)/gen -c $< -o $@

$(BUILD)/obj/%.o: %.c $(GEN_STAMP) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(OBJ_DEFS) -MMD -MP -c $< -o $@

# The dashboard: libsoup's flags, and where the installed page and Chart.js are.
DASHBOARD_PKGS := libsoup-3.0
$(DASHBOARD_SRC:%.c=$(BUILD)/obj/%.o): OBJ_DEFS = $(shell pkg-config --cflags $(DASHBOARD_PKGS) 2>/dev/null) \
  -DSHOAL_DASHBOARD_DIR='"$(DASHBOARDDIR)"' -DSHOAL_CHARTJS='"$(CHARTJS)"'
$(DASHBOARD_SRC:%.c=$(BUILD)/obj/%.o): $(LAYOUT_STAMP)
# the page beside the binary in the build tree (BUILD/dashboard), as the server looks for it
$(BUILD)/dashboard/.stamp: $(DASHBOARD_WEB)
	@mkdir -p $(dir $@)
	cp $(DASHBOARD_WEB) $(dir $@)
	@touch $@

# The plugin loader's last directory is the installed one, found relative
# to the loaded library (an installed tree may move as a whole).
PLUGIN_RELDIR := $(shell realpath -m --relative-to='$(LIBDIR)' '$(PLUGINDIR)')
$(BUILD)/obj/src/layers/plugin.o: OBJ_DEFS = -DSHOAL_PLUGIN_RELDIR='"$(PLUGIN_RELDIR)"'
$(BUILD)/obj/src/layers/plugin.o: $(LAYOUT_STAMP)

-include $(LIB_OBJ:.o=.d) $(TOOL_OBJ:.o=.d) $(TEST_SUPPORT_OBJ:.o=.d) $(TEST_SRC:test/%.c=$(BUILD)/obj/test/%.d)

# CUDA kernels: nvcc, host side as strict as the C code.
NVCC_FLAGS = -std=c++17 -O2 -g $(CUDA_ARCH) -Iinclude -Isrc -Xcompiler -fPIC,-Wall,-Wextra$(if $(WERROR),$(comma)-Werror) \
  $(if $(WERROR),-Werror all-warnings)
$(BUILD)/obj/%.o: %.cu $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -MMD -MP -c $< -o $@
-include $(GPU_CU_OBJ:.o=.d)

# ---- the library: libshoal.so.MAJOR and libshoal.a from the same objects ----
SO_NAME := libshoal.so.$(SHOAL_MAJOR)
SO_FILE := libshoal.so.$(SHOAL_VERSION)
# -z defs: every symbol the library uses comes from a library it names
# (a sanitizer's runtime comes from the program instead).
SO_LDFLAGS := -shared -Wl,-soname,$(SO_NAME) -Wl,-Bsymbolic-functions $(if $(SANITIZE),,-Wl,-z,defs) \
  -Wl,--version-script=$(BUILD)/libshoal.map

# The ABI line: libshoal.so exports the public headers' functions and
# variables and the documented private set (src/libshoal.private, what the
# shoal command calls), nothing else (scripts/public-symbols.sh; e2e/abi).
# The soname's promise: test/abi/SONAME.abi is the public ABI the soname
# started with, and e2e/abi fails when a build is not compatible with it.
# A new SHOAL_MAJOR_VERSION (a new soname) starts its own: make abi-baseline.
.PHONY: abi-baseline
abi-baseline: $(BUILD)/libshoal.so
	@if [ -e test/abi/$(SO_NAME).abi ]; then \
	  echo "test/abi/$(SO_NAME).abi exists: $(SO_NAME) keeps the ABI it started with (a change e2e/abi refuses needs a new SHOAL_MAJOR_VERSION)"; exit 1; fi
	@mkdir -p test/abi
	scripts/abi-dump.sh $(BUILD) test/abi/$(SO_NAME).abi

$(BUILD)/libshoal.map: scripts/public-symbols.sh src/libshoal.private $(wildcard include/shoal/*.h)
	@mkdir -p $(dir $@)
	{ echo '{'; echo '  global:'; scripts/public-symbols.sh | sed 's/.*/    &;/'; \
	  echo '  local: *;'; echo '};'; } >$@.tmp && mv $@.tmp $@

# GEN_OBJ is only known once the generator ran: a second make pass, and a
# shell glob (make caches directory listings from before the generator).
# One stamp, so that the two libraries never compile them at once.
GEN_OBJ_STAMP := $(BUILD)/obj/gen/.stamp
$(GEN_OBJ_STAMP): $(GEN_STAMP) $(FLAGS_STAMP)
	@$(MAKE) --no-print-directory gen-objs
	@touch $@

$(BUILD)/libshoal.a: $(LIB_OBJ) $(GPU_CU_OBJ) $(GEN_OBJ_STAMP)
	rm -f $@
	ar rcs $@ $(LIB_OBJ) $(GPU_CU_OBJ) $(BUILD)/obj/gen/*.o

# The whole library, GPU objects included in a CUDA build (src/gpu/register.c
# plugs the backend in from a constructor when the library loads).
$(BUILD)/$(SO_FILE): $(LIB_OBJ) $(GPU_CU_OBJ) $(GEN_OBJ_STAMP) $(BUILD)/libshoal.map
	$(CC) $(SO_LDFLAGS) $(LDFLAGS) -o $@ $(LIB_OBJ) $(GPU_CU_OBJ) $(BUILD)/obj/gen/*.o -Wl,--as-needed $(LIBS)
$(BUILD)/$(SO_NAME): $(BUILD)/$(SO_FILE)
	ln -sfn $(SO_FILE) $@
$(BUILD)/libshoal.so: $(BUILD)/$(SO_NAME)
	ln -sfn $(SO_NAME) $@

.PHONY: gen-objs
gen-objs: $(GEN_OBJ)

# shoal links libshoal.so, so that plugins it loads (which link
# libshoal.so too) share its one copy of the library and layer registry.
# It finds the library next to itself (the build tree) or in ../lib
# relative to its installed place.
$(BUILD)/shoal: $(TOOL_OBJ) $(BUILD)/libshoal.so $(LAYOUT_STAMP)
	$(CC) $(LDFLAGS) -o $@ $(TOOL_OBJ) $(SAN_EXE_OBJ) -Wl,--as-needed $(BUILD)/libshoal.so \
	  -Wl,--enable-new-dtags,-rpath,'$$ORIGIN:$$ORIGIN/$(BIN_TO_LIB)' $(LIBS) \
	  $(shell pkg-config --libs $(DASHBOARD_PKGS) 2>/dev/null)

# Tests link the archive: they call internals and load no plugin.
$(BUILD)/test/%: $(BUILD)/obj/test/%.o $(TEST_SUPPORT_OBJ) $(BUILD)/libshoal.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(TEST_SUPPORT_OBJ) $(SAN_EXE_OBJ) $(BUILD)/libshoal.a $(LIBS)

# ---- pkg-config -------------------------------------------------------------
# The public headers include glib.h and gmodule.h (GError, GModule);
# everything else is the library's own business (Requires.private, used
# by `pkg-config --static`).  A program that uses tensors, layers, nets
# and updaters links libshoal.a without Thrift or LMDB (docs/LIBRARY.md).
PC_REQUIRES := glib-2.0 gobject-2.0 gmodule-2.0
# every library libshoal.so names besides those (json-glib: the launcher's
# cluster log, src/metrics; e2e/install_app checks the list against NEEDED)
PC_REQUIRES_PRIVATE := thrift_c_glib lmdb openblas zlib openssl json-glib-1.0
PC_LIBS_PRIVATE := $(strip $(if $(filter 1,$(CUDA)),-Wl$(comma)-u$(comma)shoal_gpu_register $(CUDA_LIBS)) -lm -lpthread)
# pc_file PREFIX-LINE LIBDIR INCLUDEDIR PLUGINDIR
define pc_file
prefix=$(1)
libdir=$(2)
includedir=$(3)
plugindir=$(4)

Name: shoal
Description: distributed deep learning in C: tensors, layers, nets, updaters, jobs
Version: $(SHOAL_VERSION)
Requires: $(PC_REQUIRES)
Requires.private: $(PC_REQUIRES_PRIVATE)
Libs: -L$${libdir} -lshoal
Libs.private: $(PC_LIBS_PRIVATE)
Cflags: -I$${includedir}
endef
# A path under PREFIX written as ${prefix}/...
pc_path = $(patsubst $(PREFIX)/%,$${prefix}/%,$(patsubst $(PREFIX),$${prefix},$(1)))
# Installed: relocatable (prefix relative to the .pc file, as meson's
# pkgconfig.relocatable), so a tree installed with DESTDIR or moved as a
# whole works with PKG_CONFIG_PATH alone.
PC_PREFIX := $${pcfiledir}/$(shell realpath -m --relative-to='$(PKGCONFIGDIR)' '$(PREFIX)')
$(BUILD)/shoal.pc: $(LAYOUT_STAMP) include/shoal/version.h Makefile | $(BUILD)/pkgconfig/
	$(file >$@,$(call pc_file,$(PC_PREFIX),$(call pc_path,$(LIBDIR)),$(call pc_path,$(INCLUDEDIR)),$(call pc_path,$(PLUGINDIR))))
	@echo "wrote $@"
# The build tree as a prefix: the examples build against it as they would
# against an installed shoal (PKG_CONFIG_PATH=BUILD/pkgconfig).  Its
# plugindir is where this build's library looks: PLUGIN_RELDIR beside it.
$(BUILD)/pkgconfig/shoal.pc: $(LAYOUT_STAMP) include/shoal/version.h Makefile | $(BUILD)/pkgconfig/
	$(file >$@,$(call pc_file,$(CURDIR),$(abspath $(BUILD)),$${prefix}/include,$(abspath $(BUILD)/$(PLUGIN_RELDIR))))
	@echo "wrote $@"

$(BUILD)/pkgconfig/:
	mkdir -p $@

# ---- examples: built against BUILD as an application is against an installed
# shoal, with its own Makefile and `pkg-config shoal` only
EXAMPLE_DIRS := $(patsubst %/Makefile,%,$(wildcard examples/*/Makefile))
.PHONY: examples
examples: $(BUILD)/libshoal.so $(BUILD)/pkgconfig/shoal.pc
	@for d in $(EXAMPLE_DIRS); do \
	  env -u MAKEFLAGS -u MFLAGS $(MAKE) --no-print-directory -C $$d OUT=$(abspath $(BUILD))/$$d \
	    PKG_CONFIG_PATH='$(abspath $(BUILD))/pkgconfig$(if $(PKG_CONFIG_PATH),:$(PKG_CONFIG_PATH))' CC='$(CC)' \
	    CFLAGS='$(OPT) -g -Wall -Wextra $(WERROR) $(SAN_FLAGS)' LDFLAGS='$(SAN_FLAGS)' || exit 1; \
	done

# ---- man page: help2man reads `shoal --help` and `shoal --version` --------
# docs/shoal.h2m adds the sections --help lacks, with the install's paths.
$(BUILD)/man/shoal.1: $(BUILD)/shoal docs/shoal.h2m $(LAYOUT_STAMP)
	@command -v help2man >/dev/null || { echo "help2man is missing (Debian package help2man; make deps)"; exit 1; }
	@mkdir -p $(dir $@)
	sed -e 's|@PLUGINDIR@|$(PLUGINDIR)|g' -e 's|@DOCDIR@|$(DOCDIR)|g' -e 's|@DASHBOARDDIR@|$(DASHBOARDDIR)|g' \
	  docs/shoal.h2m >$(BUILD)/man/shoal.h2m
	help2man --no-info --no-discard-stderr --include=$(BUILD)/man/shoal.h2m \
	  --name='distributed deep learning: train a job with the scheme its conf picks' \
	  --output=$@.tmp $(BUILD)/shoal
	mv $@.tmp $@

# ---- install ------------------------------------------------------------------
# `make install [PREFIX=/usr/local] [DESTDIR=stage]`; `make uninstall` with
# the same variables removes exactly those files (and shoal's own
# directories when empty: plugins someone put there stay).
INSTALL ?= install
INSTALL_HEADERS := $(wildcard include/shoal/*.h)
INSTALL_DOCS := $(wildcard docs/*.md)
INSTALL_EXAMPLE := $(wildcard examples/custom-layer/*.c examples/custom-layer/*.conf \
  examples/custom-layer/Makefile examples/custom-layer/README.md)
D := $(DESTDIR)
.PHONY: install uninstall
install: $(BUILD)/shoal $(BUILD)/libshoal.so $(BUILD)/libshoal.a $(BUILD)/shoal.pc $(BUILD)/man/shoal.1
	$(INSTALL) -d $(D)$(BINDIR) $(D)$(LIBDIR) $(D)$(PKGCONFIGDIR) $(D)$(INCLUDEDIR)/shoal $(D)$(MANDIR)/man1 \
	  $(D)$(DOCDIR)/docs $(D)$(DOCDIR)/examples/custom-layer $(D)$(PLUGINDIR) $(D)$(DASHBOARDDIR)
	$(INSTALL) -m 644 $(DASHBOARD_WEB) $(D)$(DASHBOARDDIR)/
	$(INSTALL) -m 755 $(BUILD)/$(SO_FILE) $(D)$(LIBDIR)/$(SO_FILE)
	ln -sfn $(SO_FILE) $(D)$(LIBDIR)/$(SO_NAME)
	ln -sfn $(SO_NAME) $(D)$(LIBDIR)/libshoal.so
	$(INSTALL) -m 644 $(BUILD)/libshoal.a $(D)$(LIBDIR)/libshoal.a
	$(INSTALL) -m 644 $(BUILD)/shoal.pc $(D)$(PKGCONFIGDIR)/shoal.pc
	$(INSTALL) -m 644 $(INSTALL_HEADERS) $(D)$(INCLUDEDIR)/shoal/
	$(INSTALL) -m 755 $(BUILD)/shoal $(D)$(BINDIR)/shoal
	$(INSTALL) -m 644 $(BUILD)/man/shoal.1 $(D)$(MANDIR)/man1/shoal.1
	$(INSTALL) -m 644 README.md $(D)$(DOCDIR)/README.md
	$(INSTALL) -m 644 $(INSTALL_DOCS) $(D)$(DOCDIR)/docs/
	$(INSTALL) -m 644 $(INSTALL_EXAMPLE) $(D)$(DOCDIR)/examples/custom-layer/
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && command -v ldconfig >/dev/null; then ldconfig; fi

uninstall:
	rm -f $(D)$(BINDIR)/shoal $(D)$(LIBDIR)/$(SO_FILE) $(D)$(LIBDIR)/$(SO_NAME) $(D)$(LIBDIR)/libshoal.so \
	  $(D)$(LIBDIR)/libshoal.a $(D)$(PKGCONFIGDIR)/shoal.pc $(D)$(MANDIR)/man1/shoal.1 $(D)$(DOCDIR)/README.md
	rm -f $(addprefix $(D)$(INCLUDEDIR)/shoal/,$(notdir $(INSTALL_HEADERS)))
	rm -f $(addprefix $(D)$(DOCDIR)/docs/,$(notdir $(INSTALL_DOCS)))
	rm -f $(addprefix $(D)$(DOCDIR)/examples/custom-layer/,$(notdir $(INSTALL_EXAMPLE)))
	rm -f $(addprefix $(D)$(DASHBOARDDIR)/,$(notdir $(DASHBOARD_WEB)))
	@for d in $(D)$(INCLUDEDIR)/shoal $(D)$(PLUGINDIR) $(D)$(LIBDIR)/shoal $(D)$(DASHBOARDDIR) $(D)$(DATADIR)/shoal $(D)$(DOCDIR)/docs \
	  $(D)$(DOCDIR)/examples/custom-layer $(D)$(DOCDIR)/examples $(D)$(DOCDIR); do \
	  [ ! -d $$d ] || rmdir --ignore-fail-on-non-empty $$d; done
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && command -v ldconfig >/dev/null; then ldconfig; fi

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
# The example confs read build/data: the plain build imports it, and the
# sanitizer build's data folder is a link to it (the e2e scripts that
# read BUILD/data: python_dataset, memory_budget, ulimit_*, ...).
data:
	@$(MAKE) --no-print-directory SANITIZE= BUILD=build data
	@mkdir -p $(BUILD)
	@[ -e $(BUILD)/data ] || ln -sfn $(abspath build/data) $(BUILD)/data
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

# a longer chaos run than make test's one round (test/e2e/chaos.sh):
# SHOAL_CHAOS_ROUNDS rounds of faults in each scheme, SHOAL_CHAOS_TRIES
# tries of each SIGINT-then-resume, concurrent run and orphan check,
# SHOAL_CHAOS_SEED; then every fault of the namespace hosts
# (test/e2e/netns_chaos.sh, SHOAL_NETNS_CHAOS_ALL=1)
.PHONY: chaos
chaos: deps
	@$(MAKE) --no-print-directory all data
	@SHOAL_CHAOS_TRIES=$${SHOAL_CHAOS_TRIES:-20} bash test/e2e/chaos.sh $(BUILD) $${SHOAL_CHAOS_ROUNDS:-5}
	@SHOAL_NETNS_CHAOS_ALL=1 bash test/e2e/netns_chaos.sh $(BUILD)

bench: deps
	@$(MAKE) --no-print-directory EXTRA_PACKAGES="$(BENCH_PACKAGES)" deps
	@$(MAKE) --no-print-directory all data
	@status=0; \
	for b in run.sh rpc.sh tls.sh sandblaster.sh group.sh partition.sh spread.sh compress.sh steadiness.sh rnn.sh rbm.sh dashboard.sh emulate_memory.sh scale_sweep.sh; do \
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
# queue hand-over made from shoal's code; the two suppressions
# (test/sanitizers/tsan.supp) are OpenBLAS's own thread pool and GLib's
# log writer (localtime's static buffer).  `make SANITIZE=thread test`
# runs the whole suite with the same two.
# The suite is chosen by a mark in each file, not by a list here: a test
# file that starts threads says "marks: threads" on a line of its own
# (C: the /* marks: threads ... */ line at its top; e2e: "# marks: threads").
THREAD_TEST_NAMES = $(patsubst test/%.c,%,$(shell grep -l '^/\* marks:.*\bthreads\b' test/test_*.c)) \
  $(patsubst test/e2e/%.sh,e2e_%,$(shell grep -l '^\# marks:.*\bthreads\b' test/e2e/*.sh))
empty :=
space := $(empty) $(empty)
THREAD_TESTS ?= ^($(subst $(space),|,$(strip $(THREAD_TEST_NAMES))))$$
ifneq ($(findstring thread,$(SANITIZE)),)
SAN_OBJ := $(BUILD)/obj/test/sanitizers/tsan_glib.o
SAN_EXE_OBJ := $(SAN_OBJ)
$(TEST_BIN) $(BUILD)/shoal: $(SAN_OBJ)
endif
.PHONY: test-threads
test-threads: deps
	@test -n "$(findstring thread,$(SANITIZE))" || { echo "usage: make SANITIZE=thread test-threads"; exit 2; }
	@$(MAKE) --no-print-directory all data
	@echo '$(SANITIZE)' > $(BUILD)/sanitize
	@test/run-tests.sh $(BUILD) '$(THREAD_TESTS)'

# `make fuzz`: libFuzzer targets fuzz/fuzz_*.c built with clang, ASan and
# UBSan into build-fuzz/, each run from its seed corpus fuzz/corpus/NAME
# until FUZZ_RUNS executions or FUZZ_SECONDS, whichever comes first (10 M
# or an hour: fuzz/README.md has the figures; new inputs go to
# build-fuzz/corpus/NAME, crashes to build-fuzz/crashes/).
# test/e2e/fuzz_smoke.sh runs each 10 s in `make test`.
# -Werror is gcc's contract; clang only warns here (and ignores gcc's pragmas).
FUZZ_BUILD := build-fuzz
FUZZ_SECONDS ?= 3600
FUZZ_RUNS ?= 10000000
FUZZ_SRC := $(wildcard fuzz/fuzz_*.c)
FUZZ_BIN := $(FUZZ_SRC:fuzz/%.c=$(BUILD)/fuzz/%)
.PHONY: fuzz fuzz-build fuzz-bins
fuzz-build:
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CUDA= CC=clang OPT='-O1 -fno-trapping-math' WERROR= \
	  CFLAGS=-Wno-unknown-pragmas SANITIZE=fuzzer-no-link,address,undefined fuzz-bins
fuzz: deps
	@$(MAKE) --no-print-directory fuzz-build
	@SHOAL_FUZZ_RUNS=$(FUZZ_RUNS) fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)
fuzz-bins: $(FUZZ_BIN)
$(BUILD)/fuzz/%: $(BUILD)/obj/fuzz/%.o $(BUILD)/libshoal.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $< $(BUILD)/libshoal.a $(LIBS)
-include $(FUZZ_SRC:fuzz/%.c=$(BUILD)/obj/fuzz/%.d)

# ---- stamps (see FLAGS_STAMP above) ------------------------------------------
# A stamp's recipe runs every time but rewrites the file only when its text
# changes; make looks at the file's time after the recipe, so dependents are
# rebuilt only then (git's GIT-CFLAGS does the same).
.PHONY: FORCE
define stamp_recipe
@mkdir -p $(dir $@)
@printf '%s\n' '$(subst ','\'',$(1))' | cmp -s - $@ || printf '%s\n' '$(subst ','\'',$(1))' >$@
endef
$(FLAGS_STAMP): FORCE
	$(call stamp_recipe,$(CC) $(CFLAGS_ALL) | $(NVCC) $(NVCC_FLAGS))
$(LAYOUT_STAMP): FORCE
	$(call stamp_recipe,$(PREFIX) $(LIBDIR) $(INCLUDEDIR) $(PKGCONFIGDIR) $(PLUGINDIR) $(BIN_TO_LIB) $(DASHBOARDDIR) $(CHARTJS))
