# gpu-telemetry. `make demo` runs the logger on simulated GPUs; `make test`
# runs the whole suite; `make bench` prints the performance table; `make deb`
# builds the Debian package.

GO       ?= go
BUILD    := $(abspath build)
BIN      := $(BUILD)/gpu-telemetry
SIMLIB   := $(BUILD)/sim/libnvidia-ml.so.1
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
PREFIX   ?= /usr/local
UNITDIR  ?= /etc/systemd/system

# go-nvml resolves NVML symbols when they are first called (the library is
# dlopen'ed at run time): the binary must be linked for lazy binding, or a
# driver that lacks a newer symbol kills it at start.
LDFLAGS  := -extldflags=-Wl,-z,lazy -X main.version=$(VERSION)
TESTLDFLAGS := -extldflags=-Wl,-z,lazy
# go-nvml's header marks functions deprecated that we still call on purpose
# (with fallbacks); keep the build output readable.
export CGO_ENABLED := 1
export CGO_CFLAGS  := -O2 -Wno-deprecated-declarations

.PHONY: all build race sim csan demo demo-b200 test test-go vet bench deb install uninstall clean

all: build sim

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/gpu-telemetry

sim:
	$(MAKE) -s -C test/simnvml OUT=$(BUILD)

# The e2e tests run this race-enabled build of the real binary.
RACEBIN := $(BUILD)/gpu-telemetry-race
race:
	$(GO) build -race -ldflags '$(LDFLAGS)' -o $(RACEBIN) ./cmd/gpu-telemetry

# The C parts (batch.c, evthread.c, fsync.c) and the simulated driver under
# AddressSanitizer and UndefinedBehaviorSanitizer, in one C program (Go's race
# detector and ASan do not mix in one binary); it also pins nvml_abi.h to
# nvml.h. See test/csan/harness.c.
NVML_H_DIR = $(shell $(GO) list -m -f '{{.Dir}}' github.com/NVIDIA/go-nvml)/pkg/nvml
CSAN_SRCS  := test/csan/harness.c sampler/batch.c sampler/evthread.c sink/fsync.c $(wildcard test/simnvml/csrc/*.c)
csan:
	@mkdir -p $(BUILD)
	$(CC) -std=gnu11 -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all \
		-pthread -rdynamic -Wall -Wno-deprecated-declarations -I"$(NVML_H_DIR)" -Isampler -Isink \
		-o $(BUILD)/csan $(CSAN_SRCS) -ldl -lm
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 $(BUILD)/csan

# About 20 s of the Blackwell GSP crash story on two simulated GPUs.
demo: build sim
	@bash deploy/demo.sh $(BIN) $(BUILD)/sim test/simnvml/scenarios/gsp-crash.scn demo-logs

# About 40 s of the B200 HBM story (SBEs climb, a remap goes pending, a DBE
# and Xid 48); B200_SCN=test/simnvml/scenarios/b200-nvlink.scn plays the NVLink one.
B200_SCN ?= test/simnvml/scenarios/b200-ecc.scn
demo-b200: build sim
	@DEMO_SECONDS=$${DEMO_SECONDS:-40} bash deploy/demo.sh $(BIN) $(BUILD)/sim $(B200_SCN) demo-logs-b200

vet:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi

# The Debian package, from a binary built for it (paths trimmed, stripped,
# position-independent, its version the package's), reproducibly: the
# timestamps are the commit's (SOURCE_DATE_EPOCH). See deploy/deb/build.sh.
DEBVERSION = $(shell deploy/deb/version.sh)
DEBARCH    = $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
DEBBIN     := $(BUILD)/deb/gpu-telemetry
deb:
	CGO_CFLAGS='$(CGO_CFLAGS) -D_FORTIFY_SOURCE=2 -fstack-protector-strong' CGO_LDFLAGS='-Wl,-z,relro' \
	$(GO) build -trimpath -buildmode=pie -ldflags '-s -w -extldflags=-Wl,-z,lazy -X main.version=$(DEBVERSION)' -o $(DEBBIN) ./cmd/gpu-telemetry
	@deploy/deb/build.sh $(DEBBIN) $(BUILD) $(DEBVERSION)

TESTENV   = GPU_TELEMETRY_BIN=$(RACEBIN) GPU_TELEMETRY_PLAIN_BIN=$(BIN) SIMNVML_DIR=$(BUILD) \
            GPU_TELEMETRY_DEB=$(BUILD)/gpu-telemetry_$(DEBVERSION)_$(DEBARCH).deb GPU_TELEMETRY_DEB_BIN=$(DEBBIN)
GOTEST   := $(GO) test -race -count=1 -ldflags '$(TESTLDFLAGS)'
# The tests of the packages that read the kernel's clocks (CLOCK_MONOTONIC,
# the kernel log's printk time), and the simulated driver's and end-to-end
# tests of the kernel log, run once more with CLOCK_MONOTONIC and
# CLOCK_BOOTTIME reading 3 minutes, in a time namespace (test/timens): a test
# that holds only on a host up for an hour fails on every host, not only on
# a fresh one. Where no time namespace can be made, one line says why.
CLOCKPKGS  := ./monitor/ ./kmsg/ ./snapshot/ ./sampler/ ./reading/ ./sink/ ./internal/kclock/
CLOCKTESTS := ^(TestDmesgTime.*|TestKmsg.*|TestKernelLinesReachTheRightGPU|TestNewXidsFromTheKernelLog|TestGSPCrashStory|TestSIGKILLThenRestartWritesBootLog)$$

# No test leaves an "NVRM: Xid" line in the host's kernel log (one pages
# the host's operators: the tests write harmless lines to /dev/kmsg): the
# kernel log check notes where the log ends before the Go tests and fails,
# naming them, on the Xid lines logged after, whether the tests passed or
# not. Where dmesg cannot be read it says so in one line and skips, except
# under CI=true as root. See test/xidcheck/xidcheck.sh.
XIDCHECK := sh test/xidcheck/xidcheck.sh
XIDMARK  := $(BUILD)/xidcheck.mark

test: build race sim vet csan deb
	@$(XIDCHECK) mark $(XIDMARK)
	@rc=0; $(MAKE) --no-print-directory test-go || rc=$$?; $(XIDCHECK) check $(XIDMARK) || rc=1; exit $$rc

# The Go tests of make test, which runs them between the kernel log checks
# after building what they run.
test-go:
	$(TESTENV) $(GOTEST) -timeout 15m ./...
	$(GO) build -o $(BUILD)/timens ./test/timens
	$(BUILD)/timens -uptime 3m -- env $(TESTENV) sh -c "$(GOTEST) -timeout 5m $(CLOCKPKGS) && $(GOTEST) -timeout 5m -run '$(CLOCKTESTS)' ./test/simnvml/ ./test/e2e/"

bench: build sim
	@bash deploy/bench.sh $(BIN) $(BUILD)

install: build
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/gpu-telemetry
	install -D -m 0644 deploy/gpu-telemetry.service $(DESTDIR)$(UNITDIR)/gpu-telemetry.service
	install -d $(DESTDIR)$(PREFIX)/share/man/man8
	$(BIN) --help-man | gzip -9n > $(DESTDIR)$(PREFIX)/share/man/man8/gpu-telemetry.8.gz
	@for f in $(DESTDIR)$(UNITDIR)/gpu-telemetry.service.d/*.conf; do \
		if [ -f "$$f" ] && grep -Eq '^[[:space:]]*ExecStart=.*--(metrics-listen|atop)' "$$f"; then \
			echo "WARNING: $$f passes --metrics-listen or --atop in an ExecStart= override: the unit now allows no IP traffic, so that listener cannot open (the logger carries on without it). Replace the override with deploy/gpu-telemetry.service.d/metrics.conf or atop.conf (docs/install.md, \"Upgrading from an ExecStart override\")." >&2; \
		fi; \
	done
	@if [ -z "$(DESTDIR)" ] && command -v systemctl >/dev/null; then systemctl daemon-reload; \
		echo "installed; start with: systemctl enable --now gpu-telemetry"; fi

# The drop-ins we ship (deploy/gpu-telemetry.service.d) go with the unit;
# other files in that directory (an operator's own overrides) stay, and are
# named.
DROPINS := $(notdir $(wildcard deploy/gpu-telemetry.service.d/*.conf))
uninstall:
	-systemctl disable --now gpu-telemetry 2>/dev/null
	rm -f $(DESTDIR)$(PREFIX)/bin/gpu-telemetry $(DESTDIR)$(UNITDIR)/gpu-telemetry.service $(DESTDIR)$(PREFIX)/share/man/man8/gpu-telemetry.8.gz
	rm -f $(addprefix $(DESTDIR)$(UNITDIR)/gpu-telemetry.service.d/,$(DROPINS))
	@d=$(DESTDIR)$(UNITDIR)/gpu-telemetry.service.d; if [ -d "$$d" ]; then \
		rmdir "$$d" 2>/dev/null || echo "kept (not ours): $$(ls "$$d" | tr '\n' ' ')in $$d" >&2; fi
	-systemctl daemon-reload 2>/dev/null

clean:
	rm -rf $(BUILD) demo-logs demo-logs-b200
