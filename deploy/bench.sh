#!/usr/bin/env bash
# make bench: the Go benchmarks of the per-sample pipeline, then the real
# binary on the simulated driver (8 GPUs at 100 ms for 60 s, and an Xid
# latency run), printed as one table.
#   bench.sh BIN BUILDDIR     (BENCH_SECONDS overrides the 60 s)
set -euo pipefail
BIN=$1 BUILD=$2
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "== go test -bench (per-sample pipeline) ..." >&2
LD_LIBRARY_PATH="$BUILD/sim" SIMNVML_SCENARIO="$PWD/test/simnvml/scenarios/healthy-8gpu.scn" \
  go test -run '^$' -bench . -benchmem -count 1 -ldflags=-extldflags=-Wl,-z,lazy \
  ./sampler/ ./anomaly/ ./sink/ ./snapshot/ | tee "$out" | grep -E '^(Benchmark|ok|FAIL)' >&2
echo "== whole process: 8 simulated GPUs at 100 ms for ${BENCH_SECONDS:-60} s, then an Xid latency run ..." >&2
go run ./test/bench -bin "$BIN" -sim "$BUILD/sim" -scenario "$PWD/test/simnvml/scenarios/healthy-8gpu.scn" \
  -seconds "${BENCH_SECONDS:-60}" -gobench "$out"
