#!/usr/bin/env bash
# make demo: run the real gpu-telemetry binary for about 20 s on simulated GPUs
# playing a scenario, then show what it wrote, the incident report, and at
# the end what `gpu-telemetry status` answered while it ran.
#   demo.sh BIN SIMDIR SCENARIO OUTDIR   (DEMO_SECONDS overrides the 20 s)
set -u
BIN=$1 SIMDIR=$2 SCN=$3 OUT=$4
SECS=${DEMO_SECONDS:-20}
rm -rf "$OUT" && mkdir -p "$OUT" || exit 1
export LD_LIBRARY_PATH="$SIMDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export SIMNVML_SCENARIO="$SCN" SIMNVML_KMSG="$OUT/kmsg.sim"
: >"$OUT/kmsg.sim"

echo "== gpu-telemetry on simulated GPUs: $(basename "$SCN"), ${SECS}s, writing to $OUT/"
# The lock file and the kernel log go into the demo dir: no root needed.
"$BIN" --interval 0.1 --log-dir "$OUT" --lock-file "$OUT/gpu-telemetry.pid" \
  --kmsg "$OUT/kmsg.sim" --follow-ups 2s,6s --socket "$OUT/control.sock" 2>"$OUT/stderr.log" &
pid=$!
sleep $((SECS / 2))
kill -USR1 $pid 2>/dev/null
sleep $((SECS - SECS / 2 - 1))
# The live view, from the daemon's memory through its control socket.
"$BIN" status --socket "$OUT/control.sock" >"$OUT/status.txt" 2>&1
status_rc=$?
kill -TERM $pid 2>/dev/null
wait $pid
rc=$?

show() { echo; echo "== $1"; }
show "exit status: $rc"
show "files"
(cd "$OUT" && find . -type f | sort | sed 's/^\.\///' | while read -r f; do printf '%8s  %s\n' "$(wc -c <"$f")" "$f"; done)
for f in "$OUT"/gpu*-deep-*.csv; do
  [ -f "$f" ] || continue
  show "$(basename "$f"): $(($(wc -l <"$f") - 2)) rows; board line, header and last 5 rows"
  head -2 "$f"
  tail -5 "$f"
  show "$(basename "$f"): rows with flags"
  awk -F, 'NR>2 && $NF!="" {print $1, $NF}' "$f" | awk '{k=$2; if (k!=last) print; last=k}' | head -30
done
show "events.log"
cat "$OUT/events.log" 2>/dev/null
for f in "$OUT"/crashes/*.log "$OUT"/spikes/*.log; do
  [ -f "$f" ] || continue
  show "snapshot $(basename "$f") (first 25 lines)"
  head -25 "$f"
done
show "status lines (SIGUSR1 and at exit)"
grep -E 'msg="?(status|final status)' "$OUT/stderr.log"
show "warnings and errors logged"
grep -E 'level=(WARN|ERROR)' "$OUT/stderr.log" | head -30
show "gpu-telemetry report --last (and $OUT/report.html)"
"$BIN" report --log-dir "$OUT" --last --html "$OUT/report.html"
# Last, as the live view ends the story: what an operator asking the
# running daemon saw.
show "gpu-telemetry status, asked 1 s before the end (exit status $status_rc: 0 OK, 1 warning, 2 critical, 3 unknown)"
cat "$OUT/status.txt"
exit $rc
