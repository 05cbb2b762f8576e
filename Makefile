# blueskyd: build, run and test on Debian 12.
#   make run    install what is missing, build, run blueskyd in the foreground on defaults
#   make test   install what is missing, build, run every test (in a private network namespace)
#   make bench  release build, then the benchmark (docs/PERFORMANCE.md)
#   make install / make uninstall   PREFIX (default /usr/local) and DESTDIR, see README.md

SWIFT      ?= swift
# End-to-end suites run at once by `make test` (see the test target).
E2E_WIDTH  ?= 1
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
DEB_PACKAGES := libsqlite3-dev libsystemd-dev systemd dnsmasq-base socat util-linux iproute2 netcat-openbsd \
	mandoc man-db python3-pip sqlite3 postgresql bubblewrap
DEBUG_BIN  = $(shell $(SWIFT) build --show-bin-path)
RELEASE_BIN = $(shell $(SWIFT) build -c release --show-bin-path)
# Release builds link the Swift runtime and Foundation statically: an idle daemon then maps
# only its own binary (see docs/PERFORMANCE.md for what that does to its memory). Products are
# built one by one: a static runtime cannot go into the dynamic libraries some packages declare.
RELEASE_FLAGS = -c release --static-swift-stdlib

.PHONY: all deps build run test bench clean install uninstall release-build lint-man

# Where `make install` puts things (Debian's layout for PREFIX=/usr). INSTALL_FROM: a directory
# of already built binaries to install instead of making a release build.
PREFIX      ?= /usr/local
DESTDIR     ?=
INSTALL_FROM ?=
STRIP       ?= strip
BINDIR      = $(PREFIX)/bin
MANDIR      = $(PREFIX)/share/man
USERUNITDIR = $(PREFIX)/lib/systemd/user
DOCDIR      = $(PREFIX)/share/doc/blueskyd
BASHCOMPDIR = $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR  = $(PREFIX)/share/zsh/vendor-completions
FISHCOMPDIR = $(PREFIX)/share/fish/vendor_completions.d
INSTALL_BIN = $(or $(INSTALL_FROM),$(RELEASE_BIN))
INSTALLED_FILES = $(BINDIR)/blueskyd $(BINDIR)/bskyctl \
	$(USERUNITDIR)/blueskyd.service $(USERUNITDIR)/blueskyd.socket $(USERUNITDIR)/blueskyd-xrpc.socket \
	$(USERUNITDIR)/blueskyd-client@.socket $(USERUNITDIR)/blueskyd-client-xrpc@.socket \
	$(MANDIR)/man1/blueskyd.1 $(MANDIR)/man1/bskyctl.1 $(MANDIR)/man5/blueskyd.toml.5 \
	$(DOCDIR)/blueskyd.toml.example \
	$(BASHCOMPDIR)/bskyctl $(ZSHCOMPDIR)/_bskyctl $(FISHCOMPDIR)/bskyctl.fish

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
	@# DPoPTests' independent verifier; Debian's own python3 wants --break-system-packages for pip.
	@# Clients nobody here wrote, for the gateway's end-to-end tests: the Python atproto SDK, and
	@# Prometheus's own text parser for the metrics scrape; Authlib (with Flask) for an OAuth 2.0
	@# authorization server whose rules nobody here wrote; Mastodon.py, a Mastodon SDK.
	@for module in joserfc:joserfc atproto:atproto==0.0.73 prometheus_client:prometheus_client==0.26.0 \
	  authlib:authlib==1.3.2 flask:flask==3.1.3 mastodon:Mastodon.py==2.1.4; do \
	  python3 -c "import $${module%%:*}" 2>/dev/null || python3 -m pip install --quiet "$${module#*:}" 2>/dev/null \
	    || python3 -m pip install --quiet --break-system-packages "$${module#*:}" || exit 1; \
	done

build: deps
	$(SWIFT) build

run: build
	$(DEBUG_BIN)/blueskyd

test: deps
	$(SWIFT) build --build-tests
	# Unit suites, at most 6 at once: all 570 starting together on two cores starved the
	# timing-bound ones. Then the end-to-end suites, E2E_WIDTH at once (one by default): each
	# runs real daemons against its own testbed (a free 127.0.0.N each, its own PostgreSQL and
	# dnsmasq ports), so they can run together, and most of their time is spent waiting on the
	# clock. Three at once took 335 to 502 s instead of 863 s on this 2-core machine; of the
	# tests that failed there, three are mended, but in one run of six a login whose PAR stalled
	# gave up after 16 s instead of 6 (unexplained; its message now carries the daemon's log):
	# not the default until every one holds under load.
	BLUESKYD_BIN_DIR="$(DEBUG_BIN)" scripts/hermetic-run $(SWIFT) test --skip-build --skip EndToEndTests \
		--experimental-maximum-parallelization-width 6
	BLUESKYD_BIN_DIR="$(DEBUG_BIN)" scripts/hermetic-run $(SWIFT) test --skip-build --filter EndToEndTests \
		$(if $(filter 1,$(E2E_WIDTH)),--no-parallel,--experimental-maximum-parallelization-width $(E2E_WIDTH))
	# The units verify cleanly, the manual pages lint, make install/uninstall lay out every file.
	scripts/check-packaging "$(DEBUG_BIN)"
	# Each libFuzzer target for 10 s from its seeds (docs/FUZZING.md; scripts/fuzz long runs 10M each).
	scripts/fuzz smoke

bench: deps
	for product in blueskyd bskyctl blueskyd-bench; do $(SWIFT) build $(RELEASE_FLAGS) --product $$product || exit 1; done
	BLUESKYD_BIN_DIR="$(RELEASE_BIN)" scripts/hermetic-run $(RELEASE_BIN)/blueskyd-bench

clean:
	rm -rf .build

release-build:
	for product in blueskyd bskyctl; do $(SWIFT) build $(RELEASE_FLAGS) --product $$product || exit 1; done

install: $(if $(INSTALL_FROM),,release-build)
	install -d "$(DESTDIR)$(BINDIR)" "$(DESTDIR)$(USERUNITDIR)" "$(DESTDIR)$(MANDIR)/man1" "$(DESTDIR)$(MANDIR)/man5" \
	  "$(DESTDIR)$(DOCDIR)" "$(DESTDIR)$(BASHCOMPDIR)" "$(DESTDIR)$(ZSHCOMPDIR)" "$(DESTDIR)$(FISHCOMPDIR)"
	# Stripped: the symbol tables are most of a Swift binary's size and no use to a user (a
	# crash report still names Swift functions: their metadata stays).
	install -m 755 -s --strip-program="$(STRIP)" "$(INSTALL_BIN)/blueskyd" "$(INSTALL_BIN)/bskyctl" "$(DESTDIR)$(BINDIR)/"
	sed 's|^ExecStart=/usr/local/bin/|ExecStart=$(BINDIR)/|' packaging/systemd/blueskyd.service > "$(DESTDIR)$(USERUNITDIR)/blueskyd.service"
	chmod 644 "$(DESTDIR)$(USERUNITDIR)/blueskyd.service"
	install -m 644 packaging/systemd/blueskyd.socket packaging/systemd/blueskyd-xrpc.socket \
	  packaging/systemd/blueskyd-client@.socket packaging/systemd/blueskyd-client-xrpc@.socket "$(DESTDIR)$(USERUNITDIR)/"
	install -m 644 man/blueskyd.1 man/bskyctl.1 "$(DESTDIR)$(MANDIR)/man1/"
	install -m 644 man/blueskyd.toml.5 "$(DESTDIR)$(MANDIR)/man5/"
	install -m 644 etc/blueskyd.toml "$(DESTDIR)$(DOCDIR)/blueskyd.toml.example"
	"$(INSTALL_BIN)/bskyctl" --generate-completion-script bash > "$(DESTDIR)$(BASHCOMPDIR)/bskyctl"
	"$(INSTALL_BIN)/bskyctl" --generate-completion-script zsh > "$(DESTDIR)$(ZSHCOMPDIR)/_bskyctl"
	"$(INSTALL_BIN)/bskyctl" --generate-completion-script fish > "$(DESTDIR)$(FISHCOMPDIR)/bskyctl.fish"
	chmod 644 "$(DESTDIR)$(BASHCOMPDIR)/bskyctl" "$(DESTDIR)$(ZSHCOMPDIR)/_bskyctl" "$(DESTDIR)$(FISHCOMPDIR)/bskyctl.fish"

uninstall:
	rm -f $(addprefix "$(DESTDIR),$(addsuffix ",$(INSTALLED_FILES)))
	rmdir "$(DESTDIR)$(DOCDIR)" 2>/dev/null || true

lint-man:
	mandoc -T lint -W warning man/blueskyd.1 man/bskyctl.1 man/blueskyd.toml.5
