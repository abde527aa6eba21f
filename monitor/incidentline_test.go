package monitor

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// eventsLog is events.log as written so far.
func (r *rig) eventsLog() string {
	b, _ := os.ReadFile(filepath.Join(r.dir, "events.log"))
	return string(b)
}

// snapshotField is the snapshot= of the first line of events.log holding
// want; "" when there is none.
func snapshotField(log, want string) string {
	for line := range strings.Lines(log) {
		if strings.Contains(line, want) {
			if m := regexp.MustCompile(` snapshot=(\S+)`).FindStringSubmatch(line); m != nil {
				return m[1]
			}
		}
	}
	return ""
}

// A sample raising a critical event (here the GPU lost) whose row waits on
// the side goroutine behind the GPU's earlier rows (after every hang) has
// its events.log line written at once, naming the incident and the
// snapshot; only the snapshot waits behind the row. When the side work is
// dropped (still queued at shutdown, or queued after the side queue
// stopped), the snapshot is abandoned: counted in snapshot_failures and
// logged with its path, and the snapshot writer's Close does not wait for
// it. The line was held back with the snapshot request, and lost with it.
func TestIncidentLineNotHeldBehindQueuedRows(t *testing.T) {
	for _, end := range []string{"built", "dropped at shutdown", "queued after shutdown"} {
		t.Run(end, func(t *testing.T) {
			r := newRig(t, 1, nil)
			gs, _, sample := stepper(r, 3)
			loseGPU(r.devs[0])
			gs.sideRows.Add(1) // a row of the GPU still waits on the side goroutine
			if end == "queued after shutdown" {
				r.m.side.closed = true
			}
			sample(3)
			gs.sideRows.Add(-1)

			log := r.eventsLog()
			if !strings.Contains(log, "source=poll type=GPU_LOST") {
				t.Fatalf("the GPU_LOST line waits on the side goroutine; events.log:\n%s", log)
			}
			path := snapshotField(log, "type=GPU_LOST")
			if path == "" || !strings.Contains(log, " incident=crash-") {
				t.Errorf("the GPU_LOST line names no incident or snapshot:\n%s", log)
			}
			switch end {
			case "built":
				r.runSide()
			case "dropped at shutdown":
				if n := r.m.side.dropQueued(); n != 2 { // the row, then the snapshot
					t.Errorf("dropQueued dropped %d jobs, want 2", n)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := r.m.snaps.Close(ctx); err != nil {
				t.Fatalf("snapshot writer's close: %v", err)
			}
			_, err := os.Stat(path)
			fails := r.counted("snapshot_failures")
			logs := r.logs.String()
			if end == "built" {
				if err != nil || fails != 0 {
					t.Errorf("snapshot= %s: %v; snapshot_failures %d", path, err, fails)
				}
				return
			}
			if err == nil {
				t.Errorf("a dropped snapshot was written: %s", path)
			}
			if fails != 1 {
				t.Errorf("snapshot_failures %d, want 1 (the abandoned snapshot)", fails)
			}
			if !strings.Contains(logs, `msg="snapshot abandoned before it was built"`) || !strings.Contains(logs, "path="+path) ||
				!strings.Contains(logs, "counter=side_drops") {
				t.Errorf("the abandoned snapshot is not logged with its path and side_drops:\n%s", logs)
			}
		})
	}
}

// A hang's NVML_HUNG line is written when the hang is reported, while the
// side goroutine, which writes the hang's rows, lags (a stalled disk): it
// waited behind them.
func TestHungLineNotHeldBehindSideWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, nil)
		unholdSide := r.holdSide()
		release := r.devs[0].Block("GetTemperature", nil)
		var during string
		r.run(time.Second, func() {
			time.Sleep(1500 * time.Millisecond) // past the 1 s deadline: reported hung
			during = r.eventsLog()
			release()
			time.Sleep(500 * time.Millisecond)
			unholdSide()
		})
		if !strings.Contains(during, "type=NVML_HUNG function=nvmlDeviceGetTemperature") || snapshotField(during, "type=NVML_HUNG") == "" {
			t.Errorf("no NVML_HUNG line naming its snapshot while the side goroutine lagged; events.log then:\n%s", during)
		}
		log := r.eventsLog()
		hung, rec := strings.Index(log, "type=NVML_HUNG"), strings.Index(log, "type=NVML_RECOVERED")
		if hung < 0 || rec < hung {
			t.Errorf("NVML_HUNG (at %d) not before NVML_RECOVERED (at %d):\n%s", hung, rec, log)
		}
		if path := snapshotField(log, "type=NVML_HUNG"); path != "" {
			if _, err := os.Stat(path); err != nil {
				t.Errorf("the hang's snapshot: %v", err)
			}
		}
	})
}

// blockingLog is a log whose first record holding msg waits in its write
// until release is closed (at most 10 s), as a slow stderr would.
type blockingLog struct {
	bytes.Buffer
	mu      sync.Mutex
	msg     string
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (b *blockingLog) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(b.msg)) {
		b.once.Do(func() {
			close(b.entered)
			select {
			case <-b.release:
			case <-time.After(10 * time.Second):
			}
		})
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.Write(p)
}

// The same Xid from NVML and the kernel log arrives on two goroutines. The
// second report is a duplicate; its line must name the incident the first
// report counted it in, even when the first report has not yet written its
// line (here it is held in its log call, as by a slow stderr). It named no
// incident: the first report had not yet reached the snapshot manager.
func TestDuplicateXidNamesTheFirstReportsIncident(t *testing.T) {
	blog := &blockingLog{msg: `msg="critical GPU event"`, entered: make(chan struct{}), release: make(chan struct{})}
	r := newRig(t, 1, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(blog, nil)) })
	now := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.m.onEvent(reading.Event{Time: now, GPU: 0, Kind: reading.EventXid, Source: reading.SourceNVML, Data: 48})
	}()
	select {
	case <-blog.entered:
	case <-done: // logged before its decision: nothing held
	}
	r.m.onEvent(kernelXid(t, r.m, kmsg.Record{Message: "NVRM: Xid (PCI:0000:01:00): 48, pid=1, DBE (double bit error)"}, now.Add(time.Millisecond)))
	close(blog.release)
	<-done
	log := r.eventsLog()
	var dupLine string
	for line := range strings.Lines(log) {
		if strings.Contains(line, "duplicate_of=nvml") {
			dupLine = line
		}
	}
	id, _ := r.m.snaps.Incident(0)
	if id == "" || !strings.Contains(dupLine, " incident="+id+" ") {
		t.Errorf("the duplicate's line does not name incident %q:\n%s", id, log)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r.m.snaps.Close(ctx)
}

// Many GPUs each get the same Xid from both sources at once: every
// duplicate's line names its GPU's incident.
func TestConcurrentDuplicateXidsNameTheirIncident(t *testing.T) {
	const gpus = 8
	r := newRig(t, gpus, nil)
	now := time.Now()
	var nvml, kernel []reading.Event
	for g := range gpus {
		nvml = append(nvml, reading.Event{Time: now, GPU: g, Kind: reading.EventXid, Source: reading.SourceNVML, Data: 48})
		kernel = append(kernel, kernelXid(t, r.m, kmsg.Record{Message: fmt.Sprintf("NVRM: Xid (PCI:0000:%02x:00): 48, pid=1, DBE (double bit error)", g+1)}, now))
	}
	var wg sync.WaitGroup
	for _, evs := range [][]reading.Event{nvml, kernel} {
		wg.Go(func() {
			for _, e := range evs {
				r.m.onEvent(e)
			}
		})
	}
	wg.Wait()
	n := 0
	for line := range strings.Lines(r.eventsLog()) {
		if !strings.Contains(line, "duplicate_of=") {
			continue
		}
		n++
		if !strings.Contains(line, " incident=crash-") {
			t.Errorf("a duplicate's line names no incident: %s", line)
		}
	}
	if n != gpus {
		t.Errorf("%d duplicates, want %d", n, gpus)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r.m.snaps.Close(ctx)
}

// A kernel Xid whose text holds bytes the kernel escapes (a terminal
// escape, invalid UTF-8) is written with them as the kernel printed them
// (\xNN), not with the invalid ones turned into U+FFFD (nor the control
// bytes into Go escapes): the line stays valid UTF-8 and logfmt, and keeps
// the kernel's bytes.
func TestKernelTextKeepsTheKernelsBytes(t *testing.T) {
	r := newRig(t, 1, nil)
	const printed = `NVRM: Xid (PCI:0000:01:00): 13, \x1b[1m \xff\xfe \x5c`
	rec, err := kmsg.ParseRecord([]byte("3,1,1000,-;" + printed))
	if err != nil {
		t.Fatal(err)
	}
	r.m.onEvent(kernelXid(t, r.m, rec, time.Now()))
	log := r.eventsLog()
	if !utf8.ValidString(log) {
		t.Errorf("events.log is not UTF-8:\n%q", log)
	}
	l, ok := sink.ParseEventLine(strings.TrimSpace(log))
	if !ok || l.KV["text"] != printed {
		t.Errorf("text= %q, want the kernel's %q; events.log:\n%s", l.KV["text"], printed, log)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r.m.snaps.Close(ctx)
}
