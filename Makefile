# Thin wrapper over CMake. The README's two commands are `make demo` and `make test`.
BUILD ?= build
JOBS ?= $(shell nproc)
CUVIL_VENV ?= $(or $(XDG_DATA_HOME),$(HOME)/.local/share)/cuvil/venv
export CUVIL_VENV
PY := $(CUVIL_VENV)/bin/python

.PHONY: all build setup setup-debs demo test test-c test-python test-python-avx2 test-sanitize test-conformance conformance fuzz clean install bench bench-full bench-models wheel

# make install PREFIX=/opt/cuvil: the tools, libcuvil, the headers and the runtime (CMakeLists.txt)
PREFIX ?= /usr/local

all: build

setup-debs:
	@tools/setup/setup.sh --debs-only

setup:
	@tools/setup/setup.sh

build: setup-debs
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release > $(BUILD).cmake.log 2>&1 || { cat $(BUILD).cmake.log; exit 1; }
	@cmake --build $(BUILD) -j$(JOBS)

install: build
	@cmake --install $(BUILD) --prefix $(PREFIX)

# The Python package as a wheel (dist/cuvil-*.whl) that carries libcuvil and the runtime it
# compiles models against (make install's tree, in cuvil/_native): `pip install dist/cuvil-*.whl`
# in any Python 3 environment on this platform; compiling needs a C compiler (cc) there.
WHEEL_DIR ?= dist
wheel: setup build
	@rm -rf $(BUILD)/wheel && mkdir -p $(BUILD)/wheel $(WHEEL_DIR)
	@cp -r python $(BUILD)/wheel/src && rm -rf $(BUILD)/wheel/src/cuvil/_native
	@# (a setuptools build/ left in python/ by an earlier pip run would put its stale copies in
	@# the wheel: build_py keeps a target newer than its source, and cp makes them all new)
	@rm -rf $(BUILD)/wheel/src/build $(BUILD)/wheel/src/*.egg-info
	@find $(BUILD)/wheel/src -name __pycache__ -prune -exec rm -rf {} +
	@cmake --install $(BUILD) --prefix $(abspath $(BUILD))/wheel/src/cuvil/_native > $(BUILD)/wheel/install.log
	@$(PY) -m pip wheel -q --no-deps --no-build-isolation -w $(WHEEL_DIR) $(BUILD)/wheel/src 2> $(BUILD)/wheel/pip.log || { cat $(BUILD)/wheel/pip.log; exit 1; }
	@ls $(WHEEL_DIR)/cuvil-*.whl

# Compile the bundled example model, build the example C program against it, classify.
demo: setup build
	@tools/demo.sh $(BUILD)

# Every test, then again on a build with AddressSanitizer + UBSan (the compiler, the tools and
# the kernels; compiled models stay plain), then each fuzz target for FUZZ_SECONDS (a short run
# that must find nothing). `make test SANITIZE=0 FUZZ_SECONDS=0` skips the last two.
SANITIZE ?= 1
FUZZ_SECONDS ?= 30
test: setup build test-c test-python test-python-avx2 test-conformance
ifeq ($(SANITIZE),1)
	@$(MAKE) --no-print-directory test-sanitize
endif
ifneq ($(FUZZ_SECONDS),0)
	@$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(FUZZ_SECONDS)
endif

test-sanitize: setup-debs
	@cmake -S . -B $(BUILD)-asan -DCMAKE_BUILD_TYPE=Debug -DCUVIL_SANITIZE=ON > $(BUILD)-asan.cmake.log 2>&1 || { cat $(BUILD)-asan.cmake.log; exit 1; }
	@cmake --build $(BUILD)-asan -j$(JOBS)
	@$(MAKE) --no-print-directory test-c test-python BUILD=$(BUILD)-asan PYTEST_ARGS='-m "not plain"'

# Not a test: the benchmark suite (issue 34): 16 architectures (bench/suite.py, models from
# tools/models/build_suite.py and build_transformers.py, seeded weights), Cuvil against ONNX Runtime
# in alternating turns at 1 and 2 threads, and the GEMM microbenchmark, added to bench/RESULTS.md.
# `make bench`: 4 turns of 5 runs (~15 min with the exports the first time); `make bench-full`: 20
# of 10, with PyTorch eager and torch.compile columns. SUITE_ARGS='--target x86_64-avx2
# --ort-avx2-only' for the AVX2 build against an AVX2-only ONNX Runtime (on an AVX-512 machine).
SUITE_ARGS ?=
bench: setup build
	@$(PY) bench/suite.py --build $(abspath $(BUILD)) --quick --gemm --write bench/RESULTS.md $(SUITE_ARGS)

bench-full: setup build
	@$(PY) bench/suite.py --build $(abspath $(BUILD)) --full --gemm --torch --write bench/RESULTS.md $(SUITE_ARGS)

# Not a test: the earlier benchmark, ResNet-18/50 and MobileNetV2 against ONNX Runtime, PyTorch
# eager and AOTInductor, at 1 and 2 threads (bench/bench.py; BENCH_ARGS=--no-torch skips PyTorch).
BENCH_ARGS ?=
bench-models: setup build
	@$(PY) bench/bench.py --build $(abspath $(BUILD)) --write bench/RESULTS.md $(BENCH_ARGS)

# ONNX's backend suites (Debian's libonnx-testdata 1.12 and the node cases of the pinned onnx
# 1.23.2 wheel, written into BUILD by tools/gen_onnx_node_cases.py): every case compiled and run,
# its outputs compared with the case's; per-op and per-folder tables, then `N passed, N failed`.
# Fails when a case that does not pass is missing from tests/conformance/skips.txt (each with
# its reason) or a folder passes fewer cases than tests/conformance/ratchet.txt records.
# After a change that makes more pass: CONFORMANCE_ARGS='--write-skips tests/conformance/skips.txt
# --write-ratchet tests/conformance/ratchet.txt', then tools/gen_ops_doc.py (docs/ONNX_OPS.md
# counts the cases from the skip file); --ort adds ONNX Runtime's column.
CONFORMANCE_ARGS ?=
conformance: setup build
	@$(PY) tools/onnx_conformance.py --build $(BUILD) -j$(JOBS) --ops --skips tests/conformance/skips.txt \
	    --ratchet tests/conformance/ratchet.txt $(CONFORMANCE_ARGS)

test-conformance:
	@$(PY) tools/onnx_conformance.py --build $(BUILD) -j$(JOBS) --quiet --skips tests/conformance/skips.txt \
	    --ratchet tests/conformance/ratchet.txt

test-c:
	@cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

# AVX2 code runs on an AVX-512 machine too: there the model-level tests below run a second
# time with every compile for --target x86_64-avx2 (tests/python/cuvil_testlib.py reads
# CUVIL_TEST_TARGET), so that no change passes on one ISA only. ctest already runs the kernel
# tests on both (test_kernel_*_avx2); test_layout.py and test_targets.py name both targets
# themselves. On an AVX2 machine without AVX-512 the first round was AVX2's.
AVX2_TESTS ?= tests/python/test_ops.py tests/python/test_quant.py tests/python/test_models.py tests/python/test_fusion.py \
	tests/python/test_symbolic.py tests/python/test_precision.py tests/python/test_quantizer.py
test-python-avx2:
	@if grep -qw avx512f /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo && grep -qw avx512dq /proc/cpuinfo \
	    && grep -qw avx512vl /proc/cpuinfo; then \
	  echo "AVX-512 machine: the model-level tests again for --target x86_64-avx2"; \
	  CUVIL_TEST_TARGET=x86_64-avx2 CUVIL_BUILD=$(abspath $(BUILD)) $(PY) -m pytest -q -p no:cacheprovider -n $(PYTEST_WORKERS) $(PYTEST_KEEP) \
	    --basetemp=$(abspath $(BUILD))/pytest-tmp-avx2 -m "not slow" $(AVX2_TESTS) \
	    && rm -rf $(abspath $(BUILD))/pytest-tmp-avx2; \
	else echo "no AVX-512 here: the round above built for x86_64-avx2 already"; fi

# A test's temporary files (compiled models, exported ONNX files: gigabytes over the suite)
# are kept only when it fails (PYTEST_KEEP), and a run that passes removes what is left.
PYTEST_ARGS ?=
PYTEST_KEEP ?= -o tmp_path_retention_policy=failed
# pytest-xdist: one worker per core (most of a test's time is the system compiler, one process)
PYTEST_WORKERS ?= $(JOBS)
test-python:
	@CUVIL_BUILD=$(abspath $(BUILD)) $(PY) -m pytest -q -p no:cacheprovider -n $(PYTEST_WORKERS) $(PYTEST_KEEP) \
	    --basetemp=$(abspath $(BUILD))/pytest-tmp $(PYTEST_ARGS) tests/python
	@rm -rf $(abspath $(BUILD))/pytest-tmp

# libFuzzer targets (clang, ASan+UBSan) on the seed corpus, FUZZ_SECONDS each; the working
# corpus is kept in build-fuzz/corpus between runs, findings go to build-fuzz/findings.
# FUZZ_TARGETS picks some: make fuzz FUZZ_SECONDS=1800 FUZZ_TARGETS=fuzz_model_struct
FUZZ_TARGETS ?=
fuzz: setup
	@cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Release -DCUVIL_FUZZ=ON > build-fuzz.cmake.log 2>&1 || { cat build-fuzz.cmake.log; exit 1; }
	@cmake --build build-fuzz -j$(JOBS)
	@$(PY) fuzz/make_seeds.py build-fuzz/seeds
	@fuzz/run.sh build-fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

clean:
	rm -rf dist $(BUILD) $(BUILD).cmake.log $(BUILD)-asan $(BUILD)-asan.cmake.log build-fuzz build-fuzz.cmake.log
