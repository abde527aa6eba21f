package monitor

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/cper"
	"github.com/gpu-telemetry/gpu-telemetry/runstate"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// bertRegion is a Generic Error Status Block with one revision-3 entry of a
// fatal IA32/X64 processor error (ACPI 6.5 18.3.2.7.1).
func bertRegion() []byte {
	le := binary.LittleEndian
	b := make([]byte, 20+72+8)
	le.PutUint32(b[0:4], 1|1<<4)
	le.PutUint32(b[12:16], 72+8)
	le.PutUint32(b[16:20], 1)
	g := cper.ParseGUID("dc3ea0b0-a144-4797-b95b-53fa242b6e1d")
	e := b[20:]
	copy(e[0:16], g[:])
	le.PutUint32(e[16:20], 1)
	le.PutUint16(e[20:22], 0x0300)
	le.PutUint32(e[24:28], 8)
	return b
}

// The host's boot error record is recorded once per boot: a restart in the
// same boot does not repeat it, a new boot records it again.
func TestBERTOncePerBoot(t *testing.T) {
	root := t.TempDir()
	write := func(rel string, data []byte) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(cper.DefaultBERTPath, bertRegion())
	write(runstate.DefaultBootIDPath, []byte("boot-1\n"))
	write(cper.DefaultRasdaemonDB, []byte("SQLite format 3\x00"))
	logDir := ""
	lines := func() int {
		b, _ := os.ReadFile(filepath.Join(logDir, EventsLog))
		return strings.Count(string(b), "type=CPER")
	}
	run := func() *rig {
		r := newRig(t, 1, func(c *Config) {
			c.HostRoot = root
			if logDir != "" {
				c.LogDir = logDir
			}
		})
		logDir = r.m.cfg.LogDir
		r.run(300*time.Millisecond, nil)
		return r
	}
	r := run()
	b, _ := os.ReadFile(filepath.Join(logDir, EventsLog))
	if !strings.Contains(string(b), "source=bert type=CPER") || !strings.Contains(string(b), "severity=fatal") ||
		!strings.Contains(string(b), "sections=processor_ia32_x64") {
		t.Fatalf("no BERT line in events.log:\n%s", b)
	}
	if m, _ := filepath.Glob(filepath.Join(logDir, snapshot.CrashDir, "cper-*-bert.bin")); len(m) != 1 {
		t.Fatalf("saved BERT records: %v", m)
	}
	if logs := r.logs.String(); !strings.Contains(logs, "rasdaemon's database is present") || !strings.Contains(logs, "lacks nvmlSystemGetCPER_v1") {
		t.Errorf("logs lack the rasdaemon note or the driver's lack of CPER:\n%s", logs)
	}
	run()
	if n := lines(); n != 1 {
		t.Fatalf("a restart in the same boot: %d BERT lines, want 1", n)
	}
	write(runstate.DefaultBootIDPath, []byte("boot-2\n"))
	run()
	if n := lines(); n != 2 {
		t.Fatalf("a new boot: %d BERT lines, want 2", n)
	}
}

// A restart in the same boot writes no second BERT line but still shows
// the record in the host view (status, gpu_telemetry_boot_error_record).
func TestBERTShownAfterARestartInTheSameBoot(t *testing.T) {
	root := t.TempDir()
	for rel, data := range map[string][]byte{cper.DefaultBERTPath: bertRegion(), runstate.DefaultBootIDPath: []byte("boot-1\n")} {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	logDir := ""
	run := func() *rig {
		r := newRig(t, 1, func(c *Config) {
			c.HostRoot = root
			if logDir != "" {
				c.LogDir = logDir
			}
		})
		logDir = r.m.cfg.LogDir
		r.run(300*time.Millisecond, nil)
		return r
	}
	for i := range 2 {
		r := run()
		r.m.states.mu.Lock()
		bert := r.m.states.bert
		r.m.states.mu.Unlock()
		if bert == nil || bert.Severity != "fatal" {
			t.Errorf("run %d: the host view's BERT record is %+v, want the fatal record", i+1, bert)
		}
	}
	b, _ := os.ReadFile(filepath.Join(logDir, EventsLog))
	if n := strings.Count(string(b), "type=CPER"); n != 1 {
		t.Errorf("%d BERT lines after a restart in the same boot, want 1:\n%s", n, b)
	}
	if m, _ := filepath.Glob(filepath.Join(logDir, snapshot.CrashDir, "cper-*-bert.bin")); len(m) != 1 {
		t.Errorf("saved BERT records: %v", m)
	}
}

// A CPER read abandoned after its deadline, still inside the driver, is
// among the calls that keep nvmlShutdown from running at exit, as a stuck
// sample is.
func TestAbandonedCPERReadSkipsNVMLShutdown(t *testing.T) {
	r := newRig(t, 1, nil)
	release := make(chan struct{})
	returned := make(chan struct{})
	r.m.cper.r = cper.NewReader(r.dir, func(string, uint64) ([]byte, uint64, error) {
		defer close(returned)
		<-release
		return nil, 0, nil
	}, time.Millisecond, r.m.log)
	r.m.cper.r.Read(r.m.log, "GPU-a", func(time.Time, []byte, *cper.Record) {}) // abandoned after its deadline
	if got := r.m.inDriver(); !slices.Contains(got, "cper_read") {
		t.Errorf("calls inside the driver at exit %q, want the abandoned CPER read", got)
	}
	close(release)
	<-returned
	for r.m.cper.r.InDriver() {
		time.Sleep(time.Millisecond)
	}
	if got := r.m.inDriver(); slices.Contains(got, "cper_read") {
		t.Errorf("calls inside the driver at exit %q once the CPER read returned", got)
	}
}
