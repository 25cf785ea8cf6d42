# Thin wrapper over CMake. The README's two commands are `make demo` and `make test`.
BUILD ?= build
JOBS ?= $(shell nproc)
CUVIL_VENV ?= $(or $(XDG_DATA_HOME),$(HOME)/.local/share)/cuvil/venv
export CUVIL_VENV
PY := $(CUVIL_VENV)/bin/python

.PHONY: all build setup setup-debs demo test test-c test-python test-sanitize clean

all: build

setup-debs:
	@tools/setup/setup.sh --debs-only

setup:
	@tools/setup/setup.sh

build: setup-debs
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release > $(BUILD).cmake.log 2>&1 || { cat $(BUILD).cmake.log; exit 1; }
	@cmake --build $(BUILD) -j$(JOBS)

# Compile the bundled example model, build the example C program against it, classify.
demo: setup build
	@tools/demo.sh $(BUILD)

# Every test, then again on a build with AddressSanitizer + UBSan (the compiler, the tools and
# the kernels; compiled models stay plain). `make test SANITIZE=0` skips the second round.
SANITIZE ?= 1
test: setup build test-c test-python
ifeq ($(SANITIZE),1)
	@$(MAKE) --no-print-directory test-sanitize
endif

test-sanitize: setup-debs
	@cmake -S . -B $(BUILD)-asan -DCMAKE_BUILD_TYPE=Debug -DCUVIL_SANITIZE=ON > $(BUILD)-asan.cmake.log 2>&1 || { cat $(BUILD)-asan.cmake.log; exit 1; }
	@cmake --build $(BUILD)-asan -j$(JOBS)
	@$(MAKE) --no-print-directory test-c test-python BUILD=$(BUILD)-asan

test-c:
	@cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

test-python:
	@CUVIL_BUILD=$(abspath $(BUILD)) $(PY) -m pytest -q -p no:cacheprovider --basetemp=$(abspath $(BUILD))/pytest-tmp tests/python

clean:
	rm -rf $(BUILD) $(BUILD).cmake.log $(BUILD)-asan $(BUILD)-asan.cmake.log
