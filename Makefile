# gpu-telemetry. `make demo` runs the logger on simulated GPUs; `make test`
# runs the whole suite; `make bench` prints the performance table.

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

.PHONY: all build sim demo test vet bench install uninstall clean

all: build sim

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/gpu-telemetry

sim:
	$(MAKE) -s -C test/simnvml OUT=$(BUILD)

# About 20 s of the Blackwell GSP crash story on two simulated GPUs.
demo: build sim
	@bash deploy/demo.sh $(BIN) $(BUILD)/sim test/simnvml/scenarios/gsp-crash.scn demo-logs

vet:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi

test: build sim vet
	GPU_TELEMETRY_BIN=$(BIN) SIMNVML_DIR=$(BUILD) $(GO) test -race -count=1 -timeout 15m -ldflags '$(TESTLDFLAGS)' ./...

bench: build sim
	@bash deploy/bench.sh $(BIN) $(BUILD)

install: build
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/gpu-telemetry
	install -D -m 0644 deploy/gpu-telemetry.service $(DESTDIR)$(UNITDIR)/gpu-telemetry.service
	@if [ -z "$(DESTDIR)" ] && command -v systemctl >/dev/null; then systemctl daemon-reload; \
		echo "installed; start with: systemctl enable --now gpu-telemetry"; fi

uninstall:
	-systemctl disable --now gpu-telemetry 2>/dev/null
	rm -f $(DESTDIR)$(PREFIX)/bin/gpu-telemetry $(DESTDIR)$(UNITDIR)/gpu-telemetry.service
	-systemctl daemon-reload 2>/dev/null

clean:
	rm -rf $(BUILD) demo-logs
