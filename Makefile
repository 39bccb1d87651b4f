# pqbench: `make demo` builds what the demo needs and runs it, `make test` builds everything and runs
# every test. `make` builds the core (Debian packages, OpenSSL, liboqs with the demo's algorithms, the venv,
# native/); `make stacks` builds liboqs's full catalog and the optional stacks (rustls + s2n-tls, Go's crypto/tls,
# OpenSSH, Go's SSH) ahead, which pqbench otherwise builds the first time a command or spec names one; `make
# build-all` adds chromium for the tests.
PY := build/venv/bin/python
PQBENCH := build/venv/bin/pqbench

.PHONY: all build stacks build-all deps native native-asan test test-slower test-native test-python demo clean distclean

all: build

build:
	@bash scripts/build.sh core

stacks:
	@bash scripts/build.sh stacks

# Everything the tests use: the core, every stack and chromium (the report tests open the report in it).
build-all:
	@bash scripts/build.sh all

deps:
	@bash scripts/build.sh apt openssl liboqs venv

native:
	@bash scripts/build.sh native

# ASan/UBSan build of the native components and their unit tests (no root needed).
ASAN_BUILD = echo "[build] asan     building native/ with AddressSanitizer + UBSan"; \
	cmake -S native -B build/native-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DPQB_SANITIZE=ON \
	    -DPQB_OPENSSL_ROOT=$(CURDIR)/build/openssl -DPQB_LIBOQS_ROOT=$(CURDIR)/build/liboqs >build/logs/native-asan.log 2>&1 \
	  && cmake --build build/native-asan >>build/logs/native-asan.log 2>&1 \
	  || { tail -n 30 build/logs/native-asan.log; exit 1; }
ASAN_TESTS = cd build/native-asan && ctest --output-on-failure
native-asan: build-all
	@$(ASAN_BUILD)

test-native: native-asan
	@$(ASAN_TESTS)

# The tests on PYTEST_WORKERS pytest-xdist workers, then the `solo` ones alone (they load the machine themselves or
# judge its load); both passes always run. Tests that act on every testbed of the machine share one worker
# (tests/conftest.py); PYTEST_WORKERS=0 runs the first pass in this process, one test after another. By default 4
# when the CPUs are idle as the tests start, 3 when something else keeps them busy (scripts/test_workers.py).
PYTEST_WORKERS ?= $(shell python3 scripts/test_workers.py)
# (the worker count is the shell variable "workers", set once in each recipe)
PYTEST_FIRST = $(PY) -m pytest -q -rs -p no:cacheprovider --durations=20 -n $$workers --dist loadgroup -m "not solo" tests
# the solo pass collects only the files that mark a test solo
PYTEST_SOLO = $(PY) -m pytest -q -rs -p no:cacheprovider --durations=5 -m solo $(shell grep -l "pytest.mark.solo" tests/test_*.py)
test-python: build-all
	@workers="$(PYTEST_WORKERS)"; $(PYTEST_FIRST); a=$$?; $(PYTEST_SOLO); b=$$?; [ $$a -eq 0 ] && [ $$b -eq 0 ]

# The native unit tests build and run beside the first pass (it mostly waits), their output printed after it; the
# solo pass starts once both have ended. The worker count is chosen before the native build starts. Not through
# `make test-native`: its build-all would run again beside the tests and hold the build lock they wait on (a CI
# run's tests stalled 80 s).
test: build-all
	@workers="$(PYTEST_WORKERS)"; \
	  ( $(ASAN_BUILD) && $(ASAN_TESTS) ) >build/logs/test-native.out 2>&1 & native=$$!; \
	  $(PYTEST_FIRST); a=$$?; \
	  wait $$native; n=$$?; cat build/logs/test-native.out; \
	  $(PYTEST_SOLO); b=$$?; [ $$a -eq 0 ] && [ $$b -eq 0 ] && [ $$n -eq 0 ]

# `make test` as a slower, busier machine would run it (scripts/slower-machine.sh says what that emulates and
# what it cannot): run it before you stop, as CI's machine may be that machine.
test-slower:
	@bash scripts/slower-machine.sh $(MAKE) --no-print-directory test

# The demo: what this machine can do, then experiments/quick.toml (a few minutes) and its report.
demo: build
	@$(PQBENCH) doctor
	@$(PQBENCH) run experiments/quick.toml --db build/demo.duckdb
	@$(PQBENCH) report latest --db build/demo.duckdb --out build/demo-report
	@echo "report: $(CURDIR)/build/demo-report/report.html (summary: build/demo-report/summary.md)"

clean:
	rm -rf build/native build/native-asan

distclean:
	rm -rf build
