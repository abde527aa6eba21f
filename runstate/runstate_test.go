package runstate

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// TestBeginAndCleanStop: the first start finds no previous run; a start
// after MarkCleanStop finds a clean one (and removes the marker); a start
// without the marker finds an unclean one, with its state.
func TestBeginAndCleanStop(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	prev, err := Begin(dir, State{BootID: "boot-a", Started: t0, PID: 100})
	if err != nil || prev.Found || prev.Unclean() {
		t.Fatalf("first start: %+v, %v; want nothing found", prev, err)
	}
	if err := MarkCleanStop(dir, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	prev, err = Begin(dir, State{BootID: "boot-a", Started: t0.Add(2 * time.Hour), PID: 200})
	if err != nil || !prev.Found || !prev.Clean || prev.Unclean() {
		t.Fatalf("after a clean stop: %+v, %v", prev, err)
	}
	if _, err := os.Stat(filepath.Join(dir, CleanStopFile)); err == nil {
		t.Error("clean-stop marker still there after start")
	}
	// No marker this time: killed, or the host went down.
	prev, err = Begin(dir, State{BootID: "boot-b", Started: t0.Add(5 * time.Hour), PID: 300})
	if err != nil || !prev.Unclean() {
		t.Fatalf("after an unclean stop: %+v, %v", prev, err)
	}
	if prev.State.BootID != "boot-a" || prev.State.PID != 200 || !prev.State.Started.Equal(t0.Add(2*time.Hour)) {
		t.Errorf("previous run state %+v", prev.State)
	}
}

// TestBeginSweepsTempFiles: the temp files of an abandoned clean-stop
// marker's write (a stalled disk at exit) or of a run-state write cut by a
// crash are removed at the next start; a link of such a name is not
// followed (its target stays) nor removed, and other names stay.
func TestBeginSweepsTempFiles(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	target := filepath.Join(outside, "precious")
	os.WriteFile(target, []byte("not the daemon's\n"), 0o644)
	for _, n := range []string{".clean-stop.tmp-123", ".run-state.tmp-456"} {
		os.WriteFile(filepath.Join(dir, n), []byte("stopped=x\n"), 0o644)
	}
	os.Symlink(target, filepath.Join(dir, ".clean-stop.tmp-link"))
	os.Mkdir(filepath.Join(dir, ".clean-stop.tmp-dir"), 0o755)
	os.WriteFile(filepath.Join(dir, ".other.tmp-1"), nil, 0o644)
	if _, err := Begin(dir, State{BootID: "boot-a", PID: 1}); err != nil {
		t.Fatal(err)
	}
	var names []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{".clean-stop.tmp-dir", ".clean-stop.tmp-link", ".other.tmp-1", File}; !slices.Equal(names, want) {
		t.Errorf("after Begin: %q, want %q", names, want)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "not the daemon's\n" {
		t.Errorf("the link's target: %q, %v", b, err)
	}
}

// TestRunStateKeepsKmsgSeq: the kernel log position a run saves (at start
// and refreshed later) is what the next start reads back, with the boot it
// belongs to; a run-state without one (an older version, or no /dev/kmsg)
// reads as absent, not as sequence number 0.
func TestRunStateKeepsKmsgSeq(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	if _, found, err := Read(dir); found || err != nil {
		t.Fatalf("Read of an empty dir: found %v, %v", found, err)
	}
	cur := State{BootID: "boot-a", Started: t0, PID: 100, KmsgSeq: reading.Some[uint64](41)}
	if _, err := Begin(dir, cur); err != nil {
		t.Fatal(err)
	}
	cur.KmsgSeq = reading.Some[uint64](1234567)
	if err := Write(dir, cur); err != nil {
		t.Fatal(err)
	}
	got, found, err := Read(dir)
	if err != nil || !found || got.BootID != "boot-a" || got.PID != 100 || !got.Started.Equal(t0) || got.KmsgSeq != reading.Some[uint64](1234567) {
		t.Fatalf("Read = %+v, %v, %v; want what was written", got, found, err)
	}
	prev, err := Begin(dir, State{BootID: "boot-a", Started: t0.Add(time.Minute), PID: 200})
	if err != nil || prev.State.KmsgSeq != reading.Some[uint64](1234567) {
		t.Fatalf("Begin found %+v, %v; want the saved kmsg_seq", prev.State, err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, File))
	if strings.Contains(string(b), "kmsg_seq") {
		t.Errorf("run-state of a run without a kernel log position names one:\n%s", b)
	}
	if got, _, _ := Read(dir); got.KmsgSeq.OK {
		t.Errorf("absent kmsg_seq read as %+v", got.KmsgSeq)
	}
	if err := os.WriteFile(filepath.Join(dir, File), []byte("boot_id=x\nkmsg_seq=-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := Read(dir); got.KmsgSeq.OK {
		t.Errorf("a bad kmsg_seq read as %+v, want absent", got.KmsgSeq)
	}
}

// TestRunStateKeepsBoards: the boards a run monitors are what the next
// start reads back (index, UUID, serial, bus id, name), those without a
// UUID left out; an older run-state has none.
func TestRunStateKeepsBoards(t *testing.T) {
	dir := t.TempDir()
	boards := []sink.Board{
		{Index: 0, UUID: "GPU-5a3c1e2f-0b4d", Serial: "1791025012340", Bus: "00000000:01:00.0", Name: "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"},
		{Index: 1}, // stuck at start
		{Index: 2, UUID: "GPU-9e8d7c6b-0b4d", Bus: "00000000:41:00.0"},
	}
	if _, err := Begin(dir, State{BootID: "boot-a", PID: 100, GPUs: boards}); err != nil {
		t.Fatal(err)
	}
	prev, err := Begin(dir, State{BootID: "boot-a", PID: 200})
	if err != nil {
		t.Fatal(err)
	}
	want := []sink.Board{boards[0], boards[2]}
	if !slices.Equal(prev.State.GPUs, want) {
		t.Errorf("boards read back %+v, want %+v", prev.State.GPUs, want)
	}
	if got, _, _ := Read(dir); len(got.GPUs) != 0 {
		t.Errorf("a run without boards read back %+v", got.GPUs)
	}
}

// TestRunStateKeepsFirmware: the driver version, each board's VBIOS and
// maximum PCIe link survive for the next start to compare (sink.CompareFirmware).
func TestRunStateKeepsFirmware(t *testing.T) {
	dir := t.TempDir()
	vb := map[string]string{"GPU-a": "96.00.89.00.01", "GPU-b": "96.00.9F.00.04", "": "x", "GPU-c": ""}
	links := map[string]string{"GPU-a": "gen 5 x16"}
	if _, err := Begin(dir, State{BootID: "boot-a", Driver: "570.86.15", VBIOS: vb, PCIeMax: links}); err != nil {
		t.Fatal(err)
	}
	prev, err := Begin(dir, State{BootID: "boot-a"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"GPU-a": "96.00.89.00.01", "GPU-b": "96.00.9F.00.04"}
	if prev.State.Driver != "570.86.15" || !maps.Equal(prev.State.VBIOS, want) {
		t.Errorf("read back driver %q, VBIOS %v; want 570.86.15, %v", prev.State.Driver, prev.State.VBIOS, want)
	}
	if !maps.Equal(prev.State.PCIeMax, links) {
		t.Errorf("read back PCIe maxima %v, want %v", prev.State.PCIeMax, links)
	}
	// Not yet sampled in the second run: the first run's stand for it.
	if got, _, _ := Read(dir); !maps.Equal(got.PCIeMax, links) {
		t.Errorf("the second run's run-state holds PCIe maxima %v, want the first run's %v", got.PCIeMax, links)
	}
}

// The fans the fan guard holds survive in run-state for the next start
// (after a SIGKILL) and for `fan-guard release`; a malformed line is
// skipped, not misread.
func TestRunStateKeepsTheFansHeld(t *testing.T) {
	dir := t.TempDir()
	held := []FanHold{{UUID: "GPU-5a3c1e2f-0b4d", Fans: []int{0, 1}}, {UUID: "GPU-9e8d7c6b-0b4d", Fans: []int{1}}}
	if err := Write(dir, State{BootID: "boot-a", PID: 100, FanGuard: held}); err != nil {
		t.Fatal(err)
	}
	got, _, err := Read(dir)
	if err != nil || len(got.FanGuard) != 2 || got.FanGuard[0].UUID != held[0].UUID || !slices.Equal(got.FanGuard[0].Fans, []int{0, 1}) ||
		!slices.Equal(got.FanGuard[1].Fans, []int{1}) {
		t.Fatalf("read back %+v, %v; want %+v", got.FanGuard, err, held)
	}
	for _, bad := range []string{"fan_guard=GPU-x", "fan_guard= 0,1", "fan_guard=GPU-x 0,a", "fan_guard=GPU-x 99"} {
		if h, ok := parseFanHold(strings.TrimPrefix(bad, "fan_guard=")); ok {
			t.Errorf("%q read as %+v", bad, h)
		}
	}
}

// TestBeginKeepsTheFansHeld: the fans a killed run's guard held are in
// the run-state Begin writes, before anything hands them back.
func TestBeginKeepsTheFansHeld(t *testing.T) {
	dir := t.TempDir()
	held := []FanHold{{UUID: "GPU-1", Fans: []int{0, 1}}}
	if err := Write(dir, State{BootID: "boot-a", PID: 100, FanGuard: held}); err != nil {
		t.Fatal(err)
	}
	if _, err := Begin(dir, State{BootID: "boot-a", PID: 200}); err != nil {
		t.Fatal(err)
	}
	got, _, err := Read(dir)
	if err != nil || got.PID != 200 || len(got.FanGuard) != 1 || got.FanGuard[0].UUID != "GPU-1" || len(got.FanGuard[0].Fans) != 2 {
		t.Fatalf("run-state after Begin: %+v, %v; want PID 200 with GPU-1's fans 0,1", got, err)
	}
}

// TestRunStateBounded: the start reads at most maxSize of a run-state
// of 32 MiB, and refuses one that is a FIFO instead of waiting on it (the
// start would never go on).
func TestRunStateBounded(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, File)
	big := append([]byte("boot_id=abc\npid=42\n"), testutil.LongLine(4*testutil.HostileLine)...)
	if err := os.WriteFile(p, big, 0o644); err != nil {
		t.Fatal(err)
	}
	var s State
	var err error
	alloc := testutil.Allocated(func() { s, _, err = Read(dir) })
	if err != nil || s.BootID != "abc" || s.PID != 42 {
		t.Errorf("Read = %+v, %v", s, err)
	}
	if alloc > 8*maxSize { // io.ReadAll grows its buffer up to maxSize
		t.Errorf("allocated %d MiB reading a %d MiB run-state, want a few MiB at most (maxSize %d MiB)", alloc>>20, 4*testutil.HostileLine>>20, maxSize>>20)
	}
	os.Remove(p)
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Read(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("run-state as a FIFO: %v, want refused", err)
	}
}
