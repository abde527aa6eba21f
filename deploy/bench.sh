#!/usr/bin/env bash
# make bench: the Go benchmarks of the per-sample pipeline, then the real
# binary on the simulated driver, printed as one table (about 6 minutes on 2
# cores): 8 GPUs at 100 ms for 60 s next to a CPU floor measured alongside,
# the same without fdatasync and on tmpfs, 8 and 16 GPUs under the realistic
# and pessimistic NVML cost profiles (20 s each), and Xid latency runs (NVML
# event and kernel log).
#   bench.sh BIN BUILDDIR     (BENCH_SECONDS overrides the 60 s,
#                              BENCH_COST_SECONDS the 20 s; 0 skips the cost runs)
set -euo pipefail
BIN=$1 BUILD=$2
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "== go test -bench (per-sample pipeline) ..." >&2
LD_LIBRARY_PATH="$BUILD/sim" SIMNVML_SCENARIO="$PWD/test/simnvml/scenarios/healthy-8gpu.scn" \
  go test -run '^$' -bench . -benchmem -count 1 -ldflags=-extldflags=-Wl,-z,lazy \
  ./sampler/ ./anomaly/ ./sink/ ./snapshot/ | tee "$out" | grep -E '^(Benchmark|ok|FAIL)' >&2
echo "== whole process: 8 simulated GPUs at 100 ms for ${BENCH_SECONDS:-60} s with a CPU floor, no-fsync and tmpfs runs, cost profiles at 8 and 16 GPUs, Xid latency runs ..." >&2
go run ./test/bench -bin "$BIN" -sim "$BUILD/sim" -scenario "$PWD/test/simnvml/scenarios/healthy-8gpu.scn" \
  -seconds "${BENCH_SECONDS:-60}" -cost-seconds "${BENCH_COST_SECONDS:-20}" -gobench "$out"
