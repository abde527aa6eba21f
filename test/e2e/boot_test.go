package e2e

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSIGKILLThenRestartWritesBootLog: the logger is killed without a chance
// to stop cleanly; the next start writes crashes/boot-*.log with each GPU's
// last rows and the gap, and an UNCLEAN_STOP line, while sampling goes on.
// A clean stop and restart after that writes no second one.
func TestSIGKILLThenRestartWritesBootLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := start(t, opts{scenario: "gpus 2\n", dir: dir})
	p.waitFor("rows of both GPUs", 20*time.Second, func() bool { return rowCount(p.csvFile(0)) > 10 && rowCount(p.csvFile(1)) > 10 })
	p.signal(syscall.SIGKILL)
	p.wait(10 * time.Second)
	killed := time.Now()
	time.Sleep(1500 * time.Millisecond) // a gap to measure

	p2 := start(t, opts{scenario: "gpus 2\n", dir: dir})
	var boot string
	p2.waitFor("the boot log", 20*time.Second, func() bool {
		m := snapshots(dir, "boot-*.log")
		if len(m) == 1 {
			boot = m[0]
		}
		return boot != "" && strings.Contains(events(dir), "type=UNCLEAN_STOP")
	})
	p2.waitForRows(0, 6, 10*time.Second)
	p2.signal(syscall.SIGTERM)
	if code := p2.wait(15 * time.Second); code != 0 {
		t.Errorf("second run exited %d", code)
	}
	b := readFile(t, boot)
	if !strings.Contains(b, "Cause: same boot: the logger was killed") {
		t.Errorf("boot log does not say the logger was killed in this boot:\n%s", b)
	}
	// Each GPU's rows are named by its board: gpu0-<board>-deep-...
	gap := regexp.MustCompile(`GPU (\d) \(board [0-9a-f]{8}\): last row (\S+), gap (\S+)`).FindAllStringSubmatch(b, -1)
	if len(gap) != 2 {
		t.Fatalf("last row and gap of 2 GPUs expected:\n%s", b)
	}
	for _, g := range gap {
		last := parseTime(t, g[2])
		d, err := time.ParseDuration(g[3])
		if err != nil || d < 1500*time.Millisecond || d > 30*time.Second || last.After(killed) {
			t.Errorf("GPU %s: last row %s, gap %s (killed at %s)", g[1], g[2], g[3], killed.Format(time.RFC3339Nano))
		}
	}
	for _, g := range []string{"0", "1"} {
		at := regexp.MustCompile(`=== GPU ` + g + ` \(board [0-9a-f]{8}\): last 50 rows`).FindStringIndex(b)
		if at == nil {
			t.Fatalf("no last rows of GPU %s in the boot log:\n%s", g, b)
		}
		sec := b[at[0]:]
		if i := strings.Index(sec, "\n\n==="); i >= 0 {
			sec = sec[:i]
		}
		if n := strings.Count(sec, "\n 20"); n < 10 {
			t.Errorf("GPU %s: %d rows in the boot log, want the last rows of the killed run:\n%s", g, n, sec)
		}
	}
	ev := readFile(t, filepath.Join(dir, "events.log"))
	if !regexp.MustCompile(`type=UNCLEAN_STOP prev_boot=\S+ boot=\S+ same_boot=true last_row=\S+ gap_gpu0=\S+ gap_gpu1=\S+ file=crashes/boot-`).MatchString(ev) {
		t.Errorf("UNCLEAN_STOP line:\n%s", ev)
	}

	// Clean stop above: a third start writes nothing new.
	before := rowCount(p2.csvFile(0))
	p3 := start(t, opts{scenario: "gpus 2\n", dir: dir})
	p3.waitFor("rows of the third run", 10*time.Second, func() bool { return rowCount(p3.csvFile(0)) > before+5 })
	p3.signal(syscall.SIGTERM)
	p3.wait(15 * time.Second)
	m := snapshots(dir, "boot-*.log")
	if len(m) != 1 || strings.Count(readFile(t, filepath.Join(dir, "events.log")), "UNCLEAN_STOP") != 1 {
		t.Errorf("a clean restart wrote a boot log: %v", m)
	}
}

// TestBootLogOverAGzBomb: a small .csv.gz that expands to one line of
// 128 MiB, put in the log directory while no logger ran cleanly, is read by
// the next start's boot log without holding the line (a 2 MB one expanding
// to 2 GB made the daemon reach 4.2 GB at start and keep it): the boot log
// says the line was skipped, and the daemon's peak memory stays small.
func TestBootLogOverAGzBomb(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := start(t, opts{scenario: "gpus 1\n", dir: dir, plain: true})
	p.waitForRows(0, 5, 20*time.Second)
	p.signal(syscall.SIGKILL)
	p.wait(10 * time.Second)

	const line = 128 << 20
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	zw.Write([]byte("timestamp,gpu_temp\n"))
	chunk := bytes.Repeat([]byte{'x'}, 1<<20)
	for i := 0; i < line>>20; i++ {
		zw.Write(chunk)
	}
	// Yesterday's file, within retention whatever the zones.
	day := time.Now().UTC().AddDate(0, 0, -1)
	row := day.Format("2006-01-02") + "T10:00:00.000Z,50"
	zw.Write([]byte("\n" + row + "\n"))
	zw.Close()
	name := "gpu7-deadbeef-deep-" + day.Format("2006-01-02") + ".csv.gz"
	if err := os.WriteFile(filepath.Join(dir, name), gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	p2 := start(t, opts{scenario: "gpus 1\n", dir: dir, plain: true})
	var boot string
	p2.waitFor("the boot log", 30*time.Second, func() bool {
		if m := snapshots(dir, "boot-*.log"); len(m) == 1 {
			boot = m[0]
		}
		return boot != ""
	})
	status := readFile(t, fmt.Sprintf("/proc/%d/status", p2.cmd.Process.Pid))
	p2.signal(syscall.SIGTERM)
	p2.wait(15 * time.Second)
	var hwm int64 // kB
	for _, l := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			hwm, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	t.Logf("the daemon's peak resident memory: %d kB", hwm)
	if hwm == 0 || hwm > 100<<10 {
		t.Errorf("the daemon's peak resident memory %d kB reading a %d MiB line, want under 100 MiB", hwm, line>>20)
	}
	b := readFile(t, boot)
	if want := "(" + name + ": 1 line(s) over 64 KiB skipped unread)"; !strings.Contains(b, want) || !strings.Contains(b, " "+row+"\n") {
		t.Errorf("boot log lacks %q or the row after the line:\n%s", want, b)
	}
}
