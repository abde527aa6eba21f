#!/usr/bin/env bash
# make bench: the Go benchmarks of the per-sample pipeline and of report (a
# gzipped day of 8 GPUs: 70 s windows and the whole day), then the real
# binary on the simulated driver, printed as one table (about 12 minutes on
# 2 cores shared with other jobs): 8 GPUs at 100 ms with the CSVs on disk,
# the same without fdatasync and on tmpfs, interleaved in 3 rounds of 15 s,
# each run next to two CPU floors measured alongside (a bare Go ticker, and
# the write floor: the same keeping one file per GPU, one write(2) per row,
# one fdatasync per file a second, on the same disk), then the disk run under
# perf (the rows' write(2) share), the NVML calls per GPU-sample (the GPUs as
# RTX PRO 6000, B200 and H100); the --atop and live interface runs; the
# cadence under a wrong-password flood of the metrics endpoint (16 clients
# on loopback, 15 s; with BENCH_BEFORE, the binary before too); 8 and
# 16 GPUs under the realistic and pessimistic NVML cost profiles (20 s
# each); and Xid latency runs (NVML event and kernel log).
#   bench.sh BIN BUILDDIR     (BENCH_ROUNDS and BENCH_ROUND_SECONDS override
#                              the 3 rounds of 15 s, BENCH_SECONDS the 60 s
#                              cap of the --atop and live runs,
#                              BENCH_COST_SECONDS the 20 s; 0 skips the cost runs;
#                              BENCH_BEFORE=BIN runs that binary, the one before
#                              a change, next to BIN in the live interface runs)
set -euo pipefail
BIN=$1 BUILD=$2
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "== go test -bench (per-sample pipeline) ..." >&2
LD_LIBRARY_PATH="$BUILD/sim" SIMNVML_SCENARIO="$PWD/test/simnvml/scenarios/healthy-8gpu.scn" \
  go test -run '^$' -bench . -benchmem -count 1 -ldflags=-extldflags=-Wl,-z,lazy \
  ./sampler/ ./anomaly/ ./monitor/ ./sink/ ./snapshot/ ./live/ ./live/metrics/ ./report/ | tee "$out" | grep -E '^(Benchmark|ok|FAIL)' >&2
echo "== whole process: 8 simulated GPUs at 100 ms, on disk, without fdatasync and on tmpfs (${BENCH_ROUNDS:-3} rounds of ${BENCH_ROUND_SECONDS:-15} s) with a CPU floor, under perf, cost profiles at 8 and 16 GPUs, Xid latency runs ..." >&2
go run ./test/bench -bin "$BIN" -sim "$BUILD/sim" -scenario "$PWD/test/simnvml/scenarios/healthy-8gpu.scn" \
  ${BENCH_BEFORE:+-before "$BENCH_BEFORE"} -seconds "${BENCH_SECONDS:-60}" -rounds "${BENCH_ROUNDS:-3}" -round-seconds "${BENCH_ROUND_SECONDS:-15}" -cost-seconds "${BENCH_COST_SECONDS:-20}" -gobench "$out"
