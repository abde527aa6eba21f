#!/usr/bin/env bash
# make demo-fan-guard: play the failure of NVIDIA/open-gpu-kernel-modules
# issue 1045 twice on the simulated driver's thermal model (one RTX PRO 6000
# whose firmware holds its fans near 53 % under a 500 W workload): once with
# the logger only recording, once with --fan-guard. Then print both runs'
# figures side by side and write each run's report --html.
#   demo-fan-guard.sh BIN SIMDIR SCENARIO OUTDIR   (DEMO_SECONDS overrides 80 s)
set -u
BIN=$1 SIMDIR=$2 SCN=$3 OUT=$4
SECS=${DEMO_SECONDS:-80}
rm -rf "$OUT" && mkdir -p "$OUT" || exit 1
export LD_LIBRARY_PATH="$SIMDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export SIMNVML_SCENARIO="$SCN"

# run NAME FLAGS...: the logger for SECS seconds on a fresh simulated GPU.
run() {
  local name=$1 dir="$OUT/$1"
  shift
  mkdir -p "$dir" && : >"$dir/kmsg.sim"
  echo "== $name: $(basename "$SCN"), ${SECS}s, $* (writing to $dir/)"
  SIMNVML_KMSG="$dir/kmsg.sim" SIMNVML_SETLOG="$dir/setters.log" \
    "$BIN" --interval 0.1 --log-dir "$dir" --lock-file "$dir/gpu-telemetry.pid" \
    --kmsg "$dir/kmsg.sim" --follow-ups 2s --socket "$dir/control.sock" "$@" 2>"$dir/stderr.log" &
  local pid=$!
  sleep "$SECS"
  kill -TERM $pid 2>/dev/null
  wait $pid
  echo "== $name: exit status $?"
}

# Both at once: each run has its own simulated driver (the library is loaded
# per process) and its own clock from its own start.
run without &
run with --fan-guard &
wait

# figures DIR: peak and mean die temperature, mean and peak fan 0 speed,
# rows flagged temp_fan_inv, Xids logged, over the rows of the workload
# (power above 300 W).
figures() {
  local dir=$1 csv
  csv=$(ls "$dir"/gpu0-*-deep-*.csv 2>/dev/null | head -1)
  if [ -z "$csv" ]; then
    echo "no CSV"
    return
  fi
  awk -F, '
    NR == 2 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    NR > 2 && $col["power_instant"] + 0 > 300 {
      t = $col["gpu_temp"]; f = $col["fan0_speed_pct"]
      if (t != "") { n++; sum += t; if (t > peak) peak = t }
      if (f != "") { nf++; fsum += f; if (f > fpeak) fpeak = f }
      if (toupper($NF) ~ /TEMP_FAN_INV/) inv++
    }
    END {
      printf "%d|%.1f|%d|%.1f|%d|%d\n", peak, n ? sum / n : 0, fpeak, nf ? fsum / nf : 0, inv, n
    }' "$csv"
}
xids() { grep -o 'xid=[0-9]*' "$1/events.log" 2>/dev/null | sed 's/xid=//' | sort -nu | paste -sd, -; }
guard() { grep -c 'type=FAN_GUARD' "$1/events.log" 2>/dev/null; }

IFS='|' read -r p1 m1 fp1 fm1 i1 n1 <<<"$(figures "$OUT/without")"
IFS='|' read -r p2 m2 fp2 fm2 i2 n2 <<<"$(figures "$OUT/with")"
x1=$(xids "$OUT/without") x2=$(xids "$OUT/with")
echo
echo "== the same 500 W workload, side by side (rows under load: $n1 without, $n2 with)"
printf '%-34s %14s %14s\n' "" "without guard" "--fan-guard"
printf '%-34s %14s %14s\n' "peak die temperature (C)" "$p1" "$p2"
printf '%-34s %14s %14s\n' "mean die temperature (C)" "$m1" "$m2"
printf '%-34s %14s %14s\n' "peak fan 0 speed (%)" "$fp1" "$fp2"
printf '%-34s %14s %14s\n' "mean fan 0 speed (%)" "$fm1" "$fm2"
printf '%-34s %14s %14s\n' "rows flagged temp_fan_inv" "$i1" "$i2"
printf '%-34s %14s %14s\n' "Xids logged" "${x1:-none}" "${x2:-none}"
printf '%-34s %14s %14s\n' "FAN_GUARD events" "$(guard "$OUT/without")" "$(guard "$OUT/with")"
echo
echo "== the guard's events (with)"
grep 'type=FAN_GUARD' "$OUT/with/events.log" | head -12
echo
echo "== the driver's setter calls (with; the run without made none)"
echo "without: $(cat "$OUT/without/setters.log" 2>/dev/null | wc -l) setter calls"
echo "with: $(wc -l <"$OUT/with/setters.log") setter calls; the first and the last:"
head -5 "$OUT/with/setters.log" 2>/dev/null
tail -3 "$OUT/with/setters.log" 2>/dev/null
# The run without the guard has an incident (the crash); the one with it has
# none, so its report is of the moment the guard took the fans.
echo
"$BIN" report --log-dir "$OUT/without" --last --html "$OUT/without/report.html" >/dev/null &&
  echo "report --html of the crash: $OUT/without/report.html"
at=$(grep -m1 'type=FAN_GUARD kind=engaged' "$OUT/with/events.log" | sed 's/^time=\([^ ]*\).*/\1/')
"$BIN" report --log-dir "$OUT/with" --at "$at" --html "$OUT/with/report.html" >/dev/null &&
  echo "report --html of the guard's take-over at $at: $OUT/with/report.html"
# Fail the demo when the guard did not prevent what the run without it
# recorded.
[ -n "$x1" ] && [ -z "$x2" ] && [ "${i2:-1}" -eq 0 ]
