# Thin wrapper: every target installs missing Debian packages, configures and builds first.
BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc)
# Unity builds (CMakeLists.txt): a fresh build in about half the compiler time; UNITY=OFF for
# a build that recompiles one file at a time as you edit.
UNITY ?= ON

.PHONY: all deps configure build test demo screenshot bench dist format clean

all: build

# `make demo` installs only what building needs; every other target, what the tests need too.
DEPS_SET ?= test
demo: DEPS_SET = build
deps:
	@bash scripts/setup_deps.sh $(DEPS_SET)

configure: deps
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	       -DFLOPSCOPE_UNITY_BUILD=$(UNITY) >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

# ctest ends with its "Label Time Summary": the time of each label (unit, integration, deploy,
# dist, style, fuzz, python, gpu, bench-smoke), every test carrying at least one; torch2 is the
# torch tests run again on PyTorch 2.x (docs/testing.md), each also under its own label.
test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 300

# Only the programs the demo runs: the daemon, the client, the injector, its transport and the
# example job (no tests, no benches).
DEMO_TARGETS := flopscoped flopscope flopscope_inject flopscope_transport transformer_nvtx

demo: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target $(DEMO_TARGETS)
	@bash scripts/demo.sh $(BUILD_DIR)

# docs/images/report.png: the HTML report of the demo's job, photographed by headless Chromium.
screenshot: build
	@bash scripts/screenshot.sh $(BUILD_DIR)

bench: build
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target flopscope_benches
	@bash scripts/bench.sh $(BUILD_DIR)

# The relocatable bundle: $(BUILD_DIR)/dist/flopscope-<version>-linux-x86_64.tar.gz (README: GPU nodes).
DIST_TARGETS := flopscoped flopscope flopscope_inject flopscope_transport flopscope_torch

dist: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target $(DIST_TARGETS)
	@bash scripts/make_dist.sh $(BUILD_DIR)

format:
	@git ls-files '*.cc' '*.h' | xargs clang-format -i

clean:
	@rm -rf $(BUILD_DIR)
