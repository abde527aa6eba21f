package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"golang.org/x/sys/unix"
)

// monoToTime returns the conversion of a CLOCK_MONOTONIC reading of this
// machine to a time.Time whose monotonic reading is that instant: compared
// with this process's time.Now() values on the monotonic clock, whatever
// the wall clock does meanwhile.
func monoToTime(t *testing.T) func(time.Duration) time.Time {
	t.Helper()
	var ts unix.Timespec
	now := time.Now()
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return func(d time.Duration) time.Time { return now.Add(d - time.Duration(ts.Nano())) }
}

// flagTimes returns, per flag name (the part before '('), the times of the
// rows that carried it.
func flagTimes(t *testing.T, tb table) map[string][]time.Time {
	t.Helper()
	out := map[string][]time.Time{}
	for _, row := range tb.rows {
		f := tb.get(row, "flags")
		if f == "" {
			continue
		}
		at := parseTime(t, row[0])
		for _, one := range strings.Split(f, "|") {
			name := one
			if i := strings.IndexAny(one, "(:+"); i > 0 {
				name = one[:i]
			}
			out[name] = append(out[name], at)
		}
	}
	return out
}

// within reports whether ts is not empty and every one of its times is at
// least lo seconds after from and at most hi seconds after to.
func within(ts []time.Time, from time.Time, lo float64, to time.Time, hi float64) bool {
	if len(ts) == 0 {
		return false
	}
	for _, x := range ts {
		if x.Sub(from).Seconds() < lo || x.Sub(to).Seconds() > hi {
			return false
		}
	}
	return true
}

// sinceEach writes ts as seconds since from and since to.
func sinceEach(ts []time.Time, from, to time.Time) string {
	var b strings.Builder
	for _, x := range ts {
		fmt.Fprintf(&b, " %.3f/%.3f", x.Sub(from).Seconds(), x.Sub(to).Seconds())
	}
	return b.String()
}

func TestGSPCrashStory(t *testing.T) {
	t.Parallel()
	p := start(t, opts{scenario: "@gsp-crash", kmsg: true})
	p.waitFor("GPU 0 lost, with the kernel's Xid 79 on a row", 40*time.Second, func() bool {
		b, _ := os.ReadFile(p.csvFile(0))
		return strings.Contains(string(b), "GPU_LOST") && strings.Contains(string(b), "XID(79)")
	})
	// Let the +2 s follow-up and stage 2 of the snapshot land.
	p.waitFor("the follow-up capture", 20*time.Second, func() bool {
		m := snapshots(p.dir, "crash-*-gpu0+2s.log")
		return len(m) == 1
	})
	p.stop()

	tb0 := readCSV(t, p.csvFile(0))
	ft := flagTimes(t, tb0)
	// The scenario's timeline (simnvml/scenarios/gsp-crash.scn), give or
	// take a sample. Its clock starts when the simulated driver loads,
	// somewhere between the process start and the first row (a loaded
	// machine widens that gap): a flag comes no earlier than its time after
	// the process start, and no later than its time after the first row.
	started, firstRow := p.started, parseTime(t, tb0.rows[0][0])
	checks := []struct {
		flag   string
		lo, hi float64
	}{
		{"TEMP_FAN_INV", 4, 18.5}, // hot (>= 85 C from ~8 s) with fans at 30 %
		{"SPUR_THROT", 3.8, 8.3},  // SwPowerCap at 120 W of 600 W
		{"TDP_REDUCED", 5.8, 6.4}, // 600 -> 450 W at 6 s
		{"TDP_RESTORED", 11.8, 12.4},
		{"FAN_SPIKE", 10.8, 11.4}, // 30 -> 75 % at 11 s
		{"XID", 12.8, 18.6},       // 62, 45, 119, 154, 79
		{"GPU_LOST", 17.8, 40},
	}
	for _, c := range checks {
		if !within(ft[c.flag], started, c.lo, firstRow, c.hi) {
			t.Errorf("%s at%s s (after the process start/the first row, which was %.3f s after it), want at least %v s after the start and at most %v s after the first row",
				c.flag, sinceEach(ft[c.flag], started, firstRow), firstRow.Sub(started).Seconds(), c.lo, c.hi)
		}
	}
	if len(ft["TDP_REDUCED"]) != 1 || len(ft["TDP_RESTORED"]) != 1 || len(ft["FAN_SPIKE"]) != 1 {
		t.Errorf("one-off flags repeated: %v", ft)
	}
	for _, x := range []string{"XID(62)", "XID(45)", "XID(119)", "XID(154)", "XID(79)"} {
		if !strings.Contains(readFile(t, p.csvFile(0)), x) {
			t.Errorf("no row carries %s", x)
		}
	}
	// After the GPU is lost there are no fake readings and no false flags.
	lost := false
	for _, row := range tb0.rows {
		f := tb0.get(row, "flags")
		if strings.Contains(f, "GPU_LOST") {
			lost = true
		}
		if lost && (tb0.get(row, "gpu_temp") != "" || strings.Contains(f, "TDP_") || strings.Contains(f, "FAN_SPIKE")) {
			t.Fatalf("row after the GPU was lost: %v", row)
		}
	}
	// GPU 1 is healthy: no flag at all.
	tb1 := readCSV(t, p.csvFile(1))
	for _, row := range tb1.rows {
		if f := tb1.get(row, "flags"); f != "" {
			t.Fatalf("healthy GPU 1 flagged %q", f)
		}
	}

	// The 60 s cooldown holds back Xid 45, 154 and the duplicates, not the
	// worse stages: the GSP timeout (119) and the fall off the bus (79)
	// take their own snapshots.
	crashes := snapshots(p.dir, "crash-*-gpu0.log")
	if len(crashes) != 3 {
		t.Fatalf("crash snapshots for GPU 0: %v, want 3 (Xid 62, then the escalations to 119 and 79)", crashes)
	}
	for i, want := range []string{"Reason: Xid 62:", "Reason: Xid 119:", "Reason: Xid 79:"} {
		if s := readFile(t, crashes[i]); !strings.Contains(s, want) {
			t.Errorf("crash snapshot %d lacks %q", i, want)
		}
	}
	headline := "Headline: GPU 0: GSP RPC Timeout (Xid 119), then GPU has fallen off the bus (Xid 79); started with Internal micro-controller halt (Xid 62)\n"
	if s := readFile(t, crashes[2]); !strings.Contains(s, headline) {
		t.Errorf("the last snapshot lacks %q", headline)
	}
	// The follow-up lists the incident's events, those after the snapshot too.
	fu := readFile(t, snapshots(p.dir, "crash-*-gpu0+2s.log")[0])
	for _, want := range []string{"=== Critical events of this GPU in this incident (", " +0.000s Xid 62: ", "s Xid 45: "} {
		if !strings.Contains(fu, want) {
			t.Errorf("follow-up lacks %q:\n%s", want, fu)
		}
	}
	snap := readFile(t, crashes[0])
	for _, sec := range []string{"=== GPU CRASH DETECTED ===", "Reason: Xid 62", "=== Last 50 telemetry readings ===",
		"=== dmesg (nvidia/gpu errors) ===", "=== dmesg (last 200 lines) ===", "=== PCIe AER errors ===",
		"=== PCIe device state ===", "=== GPU register test (ffff = off bus) ===", "=== nvidia-smi (may fail) ===",
		"=== NVIDIA kernel modules ===", "=== System memory ===", "=== System load ===", "=== End of snapshot ==="} {
		if !strings.Contains(snap, sec) {
			t.Errorf("crash snapshot lacks %q", sec)
		}
	}
	if n := strings.Count(snap, "\n 20"); n < 50 {
		t.Errorf("crash snapshot has %d telemetry rows, want 50", n)
	}
	spikes, _ := filepath.Glob(filepath.Join(p.dir, "spikes", "spike-*-gpu0.log"))
	if len(spikes) != 1 {
		t.Errorf("spike snapshots: %v, want 1", spikes)
	}
	ev := readFile(t, filepath.Join(p.dir, "events.log"))
	for _, want := range []string{"source=kmsg type=Xid xid=79", "source=kmsg type=Xid xid=119", "type=GpuRecoveryAction action=1",
		"type=TDP_CHANGE from=600W to=450W", "type=GPU_LOST", "name=\"GPU has fallen off the bus\""} {
		if !strings.Contains(ev, want) {
			t.Errorf("events.log lacks %q", want)
		}
	}
	// Xid 62 arrives through NVML events and the kernel log at the same
	// instant: one incident, the copy read second marked as the duplicate of
	// the first (which source is read first is the scheduler's).
	var x62 []string
	for _, l := range strings.Split(ev, "\n") {
		if strings.Contains(l, " xid=62 ") {
			x62 = append(x62, l)
		}
	}
	first, second := "nvml", "kmsg"
	if len(x62) == 2 && strings.Contains(x62[0], "source=kmsg ") {
		first, second = "kmsg", "nvml"
	}
	if len(x62) != 2 || !strings.Contains(x62[0], "source="+first+" ") || strings.Contains(x62[0], "duplicate_of=") ||
		!strings.Contains(x62[1], "source="+second+" ") || !strings.Contains(x62[1], "duplicate_of="+first) {
		t.Errorf("Xid 62 from NVML and kmsg should be one incident with the second marked duplicate:\n%s", ev)
	}
}

// TestXidFloodOneSnapshot: xid-flood.scn's 25 Xid 31 and 25 Xid 13 in
// 2 s, each from NVML and the kernel log, as a user's faulting CUDA
// program makes them: one crash snapshot; per code the first 10 reports
// are written and logged, the rest held (no line, no incident, no stderr
// line) and counted: xid_lines_suppressed in the final status, one
// XID_LINES_SUPPRESSED line per code written at stop (the minute cut
// short), so that written and held lines add up to every report.
func TestXidFloodOneSnapshot(t *testing.T) {
	t.Parallel()
	p := start(t, opts{scenario: "@xid-flood", kmsg: true})
	p.waitFor("the first held Xid line", 20*time.Second, func() bool {
		return strings.Contains(p.stderr.String(), "counter=xid_lines_suppressed")
	})
	time.Sleep(3 * time.Second) // the flood lasts 2 s
	p.stop()
	crashes := snapshots(p.dir, "crash-*-gpu0.log")
	if len(crashes) != 1 {
		t.Errorf("crash snapshots: %v, want 1", crashes)
	}
	ev, errs := events(p.dir), p.stderr.String()
	heldTotal := 0
	for _, code := range []string{"31", "13"} {
		first, dups := 0, 0
		for _, l := range strings.Split(ev, "\n") {
			if strings.Contains(l, " type=Xid xid="+code+" ") {
				if strings.Contains(l, " duplicate_of=") {
					dups++
				} else {
					first++
				}
			}
		}
		m := regexp.MustCompile(`type=XID_LINES_SUPPRESSED xid=`+code+` lines=(\d+) window=1m0s`).FindAllStringSubmatch(ev, -1)
		if len(m) != 1 {
			t.Errorf("Xid %s: XID_LINES_SUPPRESSED lines %v, want one at stop:\n%s", code, m, ev)
			continue
		}
		held, _ := strconv.Atoi(m[0][1])
		heldTotal += held
		if first != 10 || first+dups+held != 50 {
			t.Errorf("Xid %s: %d lines written (and %d duplicates), %d held; want 10 written and every one of the 50 reports written or held", code, first, dups, held)
		}
	}
	if m := regexp.MustCompile(`final status.* xid_lines_suppressed=(\d+)`).FindStringSubmatch(errs); m == nil || m[1] != strconv.Itoa(heldTotal) {
		t.Errorf("final status xid_lines_suppressed %v, want %d (the lines' sum)", m, heldTotal)
	}
	if n := strings.Count(errs, "critical GPU event"); n != 20 {
		t.Errorf("%d critical events on stderr, want 20 (the first 10 of each code)", n)
	}
	// The 20 written first reports are the incident's events: one
	// snapshot, 19 held back by its cooldown.
	if !strings.Contains(errs, "crash_snapshots_suppressed=19") {
		t.Errorf("final status should count 19 suppressed snapshots")
	}
	if n := strings.Count(errs, "crash snapshot suppressed by cooldown"); n != 3 {
		t.Errorf("%d suppression warnings, want the first 3", n)
	}
}

func TestHungGPUKeepsOthersAtCadence(t *testing.T) {
	t.Parallel()
	p := start(t, opts{scenario: "@hang", plain: true}) // the shipped build: see opts.plain
	// Ticks the logger itself counted as skipped, in windows: because its
	// loop ran late (a loaded machine; no GPU has a row for those), or
	// because a GPU's previous sample was still in flight (GPU 0's own on
	// a loaded machine, or GPU 1's before its hang passed the deadline:
	// those are taken off below; the status has no per-GPU count).
	skipped := logCounters(p, "tick_overruns", "busy_skips")
	// The snapshot is taken while the call is still stuck (hang: 3 s to 23 s).
	p.waitFor("the crash snapshot of the hung GPU", 15*time.Second, func() bool {
		m := snapshots(p.dir, "crash-*-gpu1.log")
		return len(m) == 1
	})
	p.waitFor("recovery", 40*time.Second, func() bool { return strings.Contains(p.stderr.String(), "NVML answered again after a hang") })
	time.Sleep(2 * time.Second) // the second after the recovery's is checked too
	p.stop()
	skipped.stop(t, p)

	m := regexp.MustCompile(`final status.* tick_overruns=(\d+)`).FindStringSubmatch(p.stderr.String())
	if m == nil {
		t.Fatal("final status lacks tick_overruns")
	}
	overruns, _ := strconv.Atoi(m[1])
	tb0 := readCSV(t, p.csvFile(0))
	// Rows are counted per second of the logger's own clock, CLOCK_MONOTONIC
	// (the dmesg_time column, with no kernel log read), which its ticks and
	// the simulated hang run on: on a loaded VM the wall clock of the
	// timestamps was seen to step 7 s ahead of it, leaving wall seconds
	// with no tick at all and nothing for the logger to count.
	atMono := monoToTime(t)
	mono := func(row []string) time.Time {
		d, err := strconv.ParseFloat(tb0.get(row, "dmesg_time"), 64)
		if err != nil {
			t.Fatalf("dmesg_time %q: %v", tb0.get(row, "dmesg_time"), err)
		}
		return atMono(time.Duration(d * float64(time.Second)))
	}
	t0 := mono(tb0.rows[0])
	perSecond := map[int]int{}
	for _, row := range tb0.rows {
		perSecond[int(mono(row).Sub(t0).Seconds())]++
	}
	// GPU 1's busy skips before its hang passed the 1 s deadline are its
	// backfilled NVML_HUNG rows (time in the call under 1 s), at their
	// ticks; at monotonic times like GPU 0's (same clock, same anchor). Its
	// hang is reported at its first NVML_HUNG row of 1 s or more, and ends
	// at its first row after them.
	tb1 := readCSV(t, p.csvFile(1))
	hungFlag := regexp.MustCompile(`^NVML_HUNG\([^,]*,(\d+)ms\)`)
	var gpu1Skips []time.Time
	reported, recovered := -1, -1
	for _, row := range tb1.rows {
		d, _ := strconv.ParseFloat(tb1.get(row, "dmesg_time"), 64)
		at := atMono(time.Duration(d * float64(time.Second)))
		if m := hungFlag.FindStringSubmatch(tb1.get(row, "flags")); m == nil {
			if reported >= 0 && recovered < 0 {
				recovered = int(at.Sub(t0).Seconds())
			}
		} else if ms, _ := strconv.Atoi(m[1]); ms < 1000 {
			gpu1Skips = append(gpu1Skips, at)
		} else if reported < 0 {
			reported = int(at.Sub(t0).Seconds())
		}
	}
	// Every whole second of GPU 0's rows is checked, the last (cut by the
	// stop) aside; among them must be the seconds of the hang report and of
	// the recovery and the ones either side, where a poll loop that waited
	// on the hung GPU would show.
	last := int(mono(tb0.rows[len(tb0.rows)-1]).Sub(t0).Seconds())
	if reported < 2 || recovered < 0 || recovered+1 >= last {
		t.Fatalf("hang reported in second %d, recovered in second %d, GPU 0's last whole second %d: the seconds around them are not all checked", reported, recovered, last-1)
	}
	total := 0
	for s := 1; s < last; s++ {
		// 10 expected; 9 when a row's timestamp jitters across the bucket
		// edge (the next bucket then has 11). Fewer is a skipped tick, which
		// a loaded machine explains only when the logger counted it in that
		// second.
		from := t0.Add(time.Duration(s) * time.Second)
		n := perSecond[s]
		counted, lo, hi := skipped.span(from, from.Add(time.Second))
		// GPU 1's skips the count may hold are taken off: they excuse
		// none of GPU 0's ticks.
		for _, at := range gpu1Skips {
			if counted > 0 && at.After(lo) && !at.After(hi) {
				counted--
			}
		}
		if n < 9 && uint64(9-n) > counted {
			t.Errorf("GPU 0 wrote %d rows in second %d (GPU 1's hang reported in second %d, recovered in second %d; %d ticks counted as skipped then); want 10 (at least 9, less one per counted tick)",
				n, s, reported, recovered, counted)
		}
		if s < 23 {
			total += n
		}
	}
	// A loop held up by the hung GPU would skip, and count, GPU 0's ticks
	// all through the 20 s stall; a loaded machine skips some here and
	// there (a second with 4 rows and 10 skips counted around it was seen). So over
	// the stall at least half of GPU 0's ticks are rows.
	if total < 110 {
		t.Errorf("GPU 0 wrote %d rows in the 22 s GPU 1 hung; want 220, and at least half", total)
	}
	hung := 0
	for _, row := range tb1.rows {
		if strings.HasPrefix(tb1.get(row, "flags"), "NVML_HUNG(") {
			hung++
		}
	}
	// Stuck 20 s: one row per tick of the stall (those before the 1 s
	// deadline are backfilled when it passes), less the ticks skipped.
	if hung+overruns < 185 || hung > 205 {
		t.Errorf("%d NVML_HUNG rows (%d ticks skipped), want about 200", hung, overruns)
	}
	// The file stays in time order through the hang and the recovery.
	for i := 1; i < len(tb1.rows); i++ {
		if parseTime(t, tb1.rows[i][0]).Before(parseTime(t, tb1.rows[i-1][0])) {
			t.Fatalf("row %d (%s) is older than row %d (%s)", i, tb1.rows[i][0], i-1, tb1.rows[i-1][0])
		}
	}
	if m := regexp.MustCompile(`stall=(\d+\.?\d*)s`).FindStringSubmatch(p.stderr.String()); m == nil {
		t.Errorf("stall length not logged")
	} else if v, _ := strconv.ParseFloat(m[1], 64); v < 19.5 || v > 20.5 {
		t.Errorf("stall logged as %ss for a 20 s hang", m[1])
	}
	if !strings.Contains(readFile(t, filepath.Join(p.dir, "events.log")), "type=NVML_HUNG") {
		t.Errorf("events.log lacks the hang")
	}
}

func TestShutdownIsPromptWithACallStuck(t *testing.T) {
	t.Parallel()
	p := start(t, opts{scenario: "@hang"})
	p.waitFor("the hang", 15*time.Second, func() bool {
		b, _ := os.ReadFile(p.csvFile(1))
		return strings.Contains(string(b), "NVML_HUNG")
	})
	p.signal(syscall.SIGTERM)
	// Generous guard; the unit test on fake time checks the bound itself.
	if code := p.wait(12 * time.Second); code != 0 {
		t.Errorf("exit code %d", code)
	}
	if !strings.Contains(p.stderr.String(), "skipping nvmlShutdown") {
		t.Errorf("nvmlShutdown should be skipped with a call stuck")
	}
}

// TestKernelLinesReachTheRightGPU feeds the real binary kernel lines (in
// the shapes of public bug reports, with the simulated GPUs' bus ids) next to
// look-alikes that must not count, and checks which GPU each lands on: in
// events.log, in the crash snapshots and in the rows' flags.
func TestKernelLinesReachTheRightGPU(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines []string
		want  []string // in events.log
		crash []int    // the GPUs that get a crash snapshot; the others get none
		bad   []string // look-alikes, not in events.log
		check func(t *testing.T, p *proc)
	}{
		{
			name: "Xids",
			lines: []string{
				"6,900,1000000,-;nvidia-modeset: some unrelated line",
				"this is not a kmsg record",
				"4,901,1000100,-;NVRM: Xid (PCI:0000:21:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
				"4,902,1000200,-;NVRM: Xid (PCI:0000:99:00): 119, pid=1, name=x, Timeout after 45s of waiting for RPC response from GPU9 GSP!",
			},
			want: []string{
				"gpu=1 bus=00000000:21:00.0 source=kmsg type=Xid xid=79",
				"gpu=? bus=0000:99:00", // an Xid for an unknown bus is logged as such
			},
			crash: []int{1},
			check: func(t *testing.T, p *proc) {
				if !strings.Contains(readFile(t, p.csvFile(1)), "XID(79)") {
					t.Errorf("GPU 1's rows do not carry XID(79)")
				}
			},
		},
		{
			// An uncorrectable AER error whose source is GPU 0, an old
			// driver's fallen-off-the-bus line for GPU 1.
			name: "AER and fallen off the bus",
			lines: []string{
				"3,950,2000000,-;pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received: 0000:01:00.0",
				"3,951,2000010,-;nvidia 0000:01:00.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)",
				"4,952,2000119,-;mlx5_core 0000:3b:00.0: XID 119 port event",
				"4,953,2001119,-;nvme 0000:03:00.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)",
				"3,954,2002000,-;NVRM: GPU 0000:21:00.0: GPU has fallen off the bus.",
			},
			want: []string{
				"gpu=0 bus=00000000:01:00.0 source=kmsg type=AER severity=uncorrectable-fatal device=0000:00:01.0 reporter=0000:01:00.0 ktime=2.000000",
				"gpu=0 bus=00000000:01:00.0 source=kmsg type=AER severity=uncorrectable-fatal device=0000:01:00.0 ktime=2.000010",
				"gpu=1 bus=00000000:21:00.0 source=kmsg type=FALLEN_OFF_BUS ktime=2.002000",
			},
			crash: []int{0, 1},
			bad:   []string{"mlx5", "nvme", "xid=119"},
			check: func(t *testing.T, p *proc) {
				m1 := snapshots(p.dir, "crash-*-gpu1.log")
				if b := readFile(t, m1[0]); !strings.Contains(b, "Reason: GPU has fallen off the bus (kmsg, no Xid)") {
					t.Errorf("GPU 1's snapshot reason:\n%s", b[:min(len(b), 600)])
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := start(t, opts{scenario: "gpus 2\n", kmsg: true})
			p.waitForRows(1, 5, 15*time.Second)
			p.writeKmsg(tc.lines...)
			crashes := func(gpu int) int { return len(snapshots(p.dir, "crash-*-gpu"+strconv.Itoa(gpu)+".log")) }
			p.waitForEvent("every kernel line's event", 15*time.Second, tc.want...)
			p.waitFor("every crash snapshot", 15*time.Second, func() bool {
				for _, gpu := range tc.crash {
					if crashes(gpu) != 1 {
						return false
					}
				}
				return true
			})
			// A row begun after an Xid was queued as a flag carries it. A crash
			// snapshot is asked for after that, so of the rows written once it
			// is there, the second was begun after it (the first may have been
			// in flight): wait for it, or the flag would be lost at the stop.
			for gpu := range 2 {
				p.waitForRows(gpu, rowCount(p.csvFile(gpu))+2, 15*time.Second)
			}
			time.Sleep(300 * time.Millisecond) // room for a snapshot or event that must not come
			p.stop()
			ev := readFile(t, filepath.Join(p.dir, "events.log"))
			for _, bad := range tc.bad {
				if strings.Contains(ev, bad) {
					t.Errorf("a look-alike counted (%q):\n%s", bad, ev)
				}
			}
			for gpu := range 2 {
				want := 0
				if slices.Contains(tc.crash, gpu) {
					want = 1
				}
				if n := crashes(gpu); n != want {
					t.Errorf("GPU %d has %d crash snapshots, want %d", gpu, n, want)
				}
			}
			tc.check(t, p)
		})
	}
}

func TestFullDiskKeepsFilesWhole(t *testing.T) {
	t.Parallel()
	dir := testutil.SmallDisk(t, "64k")
	p := start(t, opts{scenario: "@healthy-8gpu", dir: dir, args: []string{"--min-free-mb", "0", "--no-compress"}})
	p.waitFor("the disk to fill", 30*time.Second, func() bool { return strings.Contains(p.stderr.String(), "disk full") })
	time.Sleep(time.Second)
	p.stop()
	for gpu := range 8 {
		if f := p.csvFile(gpu); f != "" {
			readCSV(t, f) // strict: a torn line fails here
		}
	}
	if !strings.Contains(p.stderr.String(), "rows_dropped=") {
		t.Errorf("no dropped-rows count")
	}
}

func TestVanishedGPUIsReported(t *testing.T) {
	t.Parallel()
	p := start(t, opts{scenario: "gpus 2\nat 1 gpu 1 removed\n", args: []string{"--inventory-interval", "500ms"}})
	p.waitForEvent("the vanished GPU in events.log", 15*time.Second, "GPU vanished from enumeration")
	time.Sleep(500 * time.Millisecond)
	p.stop()
	if !strings.Contains(p.stderr.String(), "GPU vanished from the driver's enumeration") {
		t.Errorf("vanish not logged")
	}
	ev := readFile(t, filepath.Join(p.dir, "events.log"))
	if !strings.Contains(ev, "gpu=1 bus=00000000:21:00.0 source=poll type=GPU_LOST") {
		t.Errorf("events.log:\n%s", ev)
	}
	if m := snapshots(p.dir, "crash-*-gpu1.log"); len(m) != 1 {
		t.Errorf("crash snapshots for the vanished GPU: %v", m)
	}
	// GPU 0 is unaffected.
	for _, row := range readCSV(t, p.csvFile(0)).rows {
		if row[len(row)-1] != "" {
			t.Fatalf("GPU 0 flagged: %v", row)
		}
	}
}

// TestNVMLEventsSurviveLateGPUsAndFailures: an Xid sent through NVML events
// arrives whatever happened to the event set before it.
func TestNVMLEventsSurviveLateGPUsAndFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		scenario string
		args     []string
		line     string // in events.log
		logged   string // in the logger's stderr, if set
		failed   bool   // nvml_event_failures counts the failures in the final status
	}{
		{
			// GPU 1 does not answer for the first 3 s, so its static facts
			// (and its event registration) come late; its Xid at 7 s must
			// still arrive.
			name:     "one GPU late at start",
			scenario: "gpus 2\nat 0 gpu 1 hang 3s\nat 7 gpu 1 xid 62 to events\n",
			args:     []string{"--start-timeout", "1s"},
			line:     "gpu=1 bus=00000000:21:00.0 source=nvml type=Xid xid=62",
			logged:   "a GPU answered late; registering its NVML events",
		},
		{
			// The only GPU is stuck at start (a single-GPU host restarted in
			// the middle of a GSP fault): no GPU can be registered at first,
			// and NVML events must still be registered once it answers
			// (not give up for good with "no GPU supports the watched NVML
			// events").
			name:     "every GPU late at start",
			scenario: "gpus 1\nat 0 gpu 0 hang 3s\nat 7 gpu 0 xid 62 to events\n",
			args:     []string{"--start-timeout", "1s"},
			line:     "gpu=0 bus=00000000:01:00.0 source=nvml type=Xid xid=62",
		},
		{
			// nvmlEventSetWait fails, and the wait after it stalls inside the
			// driver for longer than any margin a hand-off by timing could
			// allow: the event stream is opened again, once the failed one
			// has ended (a hand-off by timing, the C thread sleeping 1 s
			// and waiting 1 s more while Go waited 2 s, gave up on NVML
			// events for good).
			name:     "a failed wait, then a stalled one",
			scenario: "gpus 1\nat 1 eventset fail unknown for 0.5s\nat 1.6 eventset hang 3s\nat 7 gpu 0 xid 62 to events\n",
			line:     "gpu=0 bus=00000000:01:00.0 source=nvml type=Xid xid=62",
			logged:   "NVML event stream failed; opening it again",
			failed:   true,
		},
		{
			// The only GPU's registration fails (a GPU lost, an unknown
			// error): a failed open, retried with back-off, not "no GPU
			// supports the watched NVML events" for the rest of the run.
			name:     "the registration says the GPU is lost",
			scenario: "gpus 1\nat 0 gpu 0 fail nvmlDeviceRegisterEvents gpu_is_lost for 3s\nat 7 gpu 0 xid 62 to events\n",
			line:     "gpu=0 bus=00000000:01:00.0 source=nvml type=Xid xid=62",
			logged:   "cannot open NVML events; trying again",
			failed:   true,
		},
		{
			name:     "the registration fails type by type",
			scenario: "gpus 1\nat 0 gpu 0 fail nvmlDeviceRegisterEvents unknown for 3s\nat 7 gpu 0 xid 62 to events\n",
			line:     "gpu=0 bus=00000000:01:00.0 source=nvml type=Xid xid=62",
			logged:   "cannot open NVML events; trying again",
			failed:   true,
		},
		{
			// The set fails and, before it is opened again, GPU 1 hangs for
			// 20 s: its registration must not hold GPU 0's back (the
			// reopen used to wait on GPU 1 inside the driver, and GPU 0's
			// Xid at 5 s was lost).
			name:     "a failed set, then one GPU hangs before the reopen",
			scenario: "gpus 2\nat 1 eventset fail unknown for 0.5s\nat 1.2 gpu 1 hang 20s\nat 5 gpu 0 xid 62 to events\n",
			line:     "gpu=0 bus=00000000:01:00.0 source=nvml type=Xid xid=62",
			logged:   "NVML event stream failed; opening it again",
			failed:   true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := start(t, opts{scenario: tc.scenario, args: tc.args})
			p.waitForEvent("the Xid through NVML events", 30*time.Second, tc.line)
			p.stop()
			if tc.logged != "" && !strings.Contains(p.stderr.String(), tc.logged) {
				t.Errorf("stderr lacks %q", tc.logged)
			}
			if m := regexp.MustCompile(`final status.* nvml_event_failures=(\d+)`).FindStringSubmatch(p.stderr.String()); tc.failed && (m == nil || m[1] == "0") {
				t.Errorf("final status: nvml_event_failures %q, want the failures counted", m[min(len(m), 1):])
			}
		})
	}
}

// A set that keeps failing is reopened with back-off (1 s, 2 s, ...), not in
// a loop, and events flow again once the driver recovers.
func TestEventStreamBacksOffWhileFailing(t *testing.T) {
	t.Parallel()
	p := start(t, opts{scenario: `gpus 1
at 1 eventset fail unknown for 2.5s
at 6 gpu 0 xid 62 to events
`})
	p.waitForEvent("the Xid after the failures", 30*time.Second, "gpu=0 bus=00000000:01:00.0 source=nvml type=Xid xid=62")
	p.stop()
	errs := p.stderr.String()
	for _, want := range []string{`retry_in=1s`, `retry_in=2s`} {
		if !strings.Contains(errs, "NVML event stream failed; opening it again") || !strings.Contains(errs, want) {
			t.Errorf("no reopen with %s logged", want)
		}
	}
	// Failures at 1 s and 2 s (after 1 s), then open at 4 s (after 2 s).
	n := strings.Count(errs, "NVML event stream failed") + strings.Count(errs, "cannot open NVML events")
	if n == 0 || n > 3 {
		t.Errorf("%d reopen attempts in 2.5 s of failure, want 2 (back-off 1 s, 2 s)", n)
	}
	// Each failure is counted, and the count reaches the final status line.
	if m := regexp.MustCompile(`final status.* nvml_event_failures=(\d+)`).FindStringSubmatch(errs); m == nil || m[1] != strconv.Itoa(n) {
		t.Errorf("final status nvml_event_failures %v, want %d (one per failure logged)", m, n)
	}
}

// TestMissingProgramNamedOnce: on a host without the programs a snapshot
// runs (an empty PATH), each crash snapshot and follow-up says which
// program is missing and which Debian package provides it, and the log
// says it once for the whole run.
func TestMissingProgramNamedOnce(t *testing.T) {
	t.Parallel()
	p := start(t, opts{scenario: "@xid-flood", args: []string{"--follow-ups", "1s"}, env: []string{"PATH=" + t.TempDir()}})
	p.waitFor("the crash snapshot and its follow-up", 30*time.Second, func() bool {
		for _, f := range snapshots(p.dir, "crash-*.log") {
			if strings.Contains(f, "+1s") && strings.Contains(readFile(t, f), "=== End of") {
				return true
			}
		}
		return false
	})
	p.stop()
	files := snapshots(p.dir, "crash-*.log")
	if len(files) < 2 {
		t.Fatalf("crash snapshots %v: want the snapshot and its follow-up", files)
	}
	for _, f := range files {
		if s := readFile(t, f); !strings.Contains(s, "(lspci: not installed (Debian package pciutils))") {
			t.Errorf("%s does not name the missing lspci with its package:\n%s", f, s)
		}
	}
	for _, want := range []string{"lspci: not installed (Debian package pciutils)", "nvidia-smi: not installed (it comes with NVIDIA's driver)"} {
		if n := strings.Count(p.stderr.String(), want); n != 1 {
			t.Errorf("the log says %q %d times, want once:\n%s", want, n, p.stderr.String())
		}
	}
}
