# blueskyd: build, run and test on Debian 12.
#   make run    install what is missing, build, run blueskyd in the foreground on defaults
#   make test   install what is missing, build, run every test (in a private network namespace)
#   make bench  release build, then the benchmark (docs/PERFORMANCE.md)

SWIFT      ?= swift
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
DEB_PACKAGES := libsqlite3-dev libsystemd-dev dnsmasq-base socat util-linux iproute2 netcat-openbsd mandoc
DEBUG_BIN  = $(shell $(SWIFT) build --show-bin-path)
RELEASE_BIN = $(shell $(SWIFT) build -c release --show-bin-path)

.PHONY: all deps build run test bench clean

all: build

deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "Installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
	@command -v $(SWIFT) >/dev/null || { echo "swift is not on PATH: install Swift 6.1 or later from swift.org"; exit 1; }
	@python3 -c 'import joserfc' 2>/dev/null || python3 -m pip install --quiet joserfc  # DPoPTests' independent verifier

build: deps
	$(SWIFT) build

run: build
	$(DEBUG_BIN)/blueskyd

test: deps
	$(SWIFT) build --build-tests
	# Unit suites in parallel, then the end-to-end suites one at a time: each of those runs
	# real daemons against its own testbed, and the token-expiry storms need the CPU to themselves.
	BLUESKYD_BIN_DIR="$(DEBUG_BIN)" scripts/hermetic-run $(SWIFT) test --skip-build --skip EndToEndTests
	BLUESKYD_BIN_DIR="$(DEBUG_BIN)" scripts/hermetic-run $(SWIFT) test --skip-build --filter EndToEndTests --no-parallel

bench: deps
	$(SWIFT) build -c release
	BLUESKYD_BIN_DIR="$(RELEASE_BIN)" scripts/hermetic-run $(RELEASE_BIN)/blueskyd-bench

clean:
	rm -rf .build
