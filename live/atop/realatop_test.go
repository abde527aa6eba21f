package atop

import (
	"context"
	"github.com/gpu-telemetry/gpu-telemetry/live/atop/atoptest"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRealAtopV1 serves scripted figures on 127.0.0.1:59123 and reads them
// back through Debian's atop (2.8.1 speaks API version 1): the GPU lines
// carry the busy %, memory and bus ids, and the PRE lines put the test's own
// processes on the right GPU with their figures.
func TestRealAtopV1(t *testing.T) {
	bin := atoptest.NeedAtop(t)
	var pids []int
	for range 2 {
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		pids = append(pids, cmd.Process.Pid)
	}
	atoptest.LockPort(t)
	a := NewAccumulator(twoGPUs(), nil)
	cfg := DefaultConfig()
	cfg.Unix = ""
	srv := NewServer(a, cfg, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if addrs := srv.Start(ctx); len(addrs) != 1 {
		t.Fatal("127.0.0.1:59123 is taken (is atopgpud running?)")
	}
	defer srv.Close()
	feed := func() {
		for range 10 {
			a.Sample(row(0, 63, 21, 20480))
			a.Sample(row(1, 7, 2, 1024))
		}
		a.Procs(procs(0, proc(uint32(pids[0]), 55, 8192)))
		a.Procs(procs(1, proc(uint32(pids[1]), 6, 512)))
		a.Second()
	}
	feed()
	go func() {
		tk := time.NewTicker(250 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				feed()
			}
		}
	}()
	out, err := exec.Command(bin, "-k", "-a", "-P", "GPU,PRE", "1", "3").CombinedOutput()
	if err != nil {
		t.Fatalf("atop: %v\n%s", err, out)
	}
	t.Logf("atop output:\n%s", out)
	gpuLines, preLines := 0, map[int][]string{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 7 {
			continue
		}
		switch f[0] {
		case "GPU":
			// GPU host epoch date time interval | gpunum busid type busy membusy total used samples busycum membusycum memusecum
			g := f[6:]
			if len(g) < 11 {
				t.Fatalf("GPU line %q", line)
			}
			gpuLines++
			want := map[string][]string{
				"0": {"0000:01:00.0", "NVIDIA_RTX_PRO_6000_Blackwell", "63", "21", strconv.Itoa(97887 * 1024), strconv.Itoa(20480 * 1024)},
				"1": {"0000:21:00.0", "NVIDIA_B200", "7", "2", strconv.Itoa(97887 * 1024), "1048576"},
			}[g[0]]
			// atop keeps the last 12 characters of the bus id and of the type
			if want == nil || !strings.HasSuffix(want[0], g[1]) || len(g[1]) < 9 ||
				!strings.HasSuffix(want[1], g[2]) || len(g[2]) < min(12, len(want[1])) || g[3] != want[2] || g[4] != want[3] || g[5] != want[4] || g[6] != want[5] {
				t.Errorf("GPU line %q, want %v", line, want)
			}
		case "PRE":
			pid, _ := strconv.Atoi(f[6])
			preLines[pid] = f[6:]
		}
	}
	if gpuLines < 4 {
		t.Errorf("%d GPU lines, want 2 per interval", gpuLines)
	}
	for i, pid := range pids {
		p := preLines[pid]
		// PID (name) state gpustate nrgpus gpulist gpubusy membusy memnow memcum samples
		if len(p) < 10 {
			t.Errorf("no PRE line for pid %d (GPU %d)", pid, i)
			continue
		}
		wantList := strconv.Itoa(1 << i)
		wantBusy := []string{"55", "6"}[i]
		if p[3] != "A" || p[4] != "1" || p[5] != wantList || p[6] != wantBusy {
			t.Errorf("pid %d: PRE %q, want state A on GPU bitlist %s, busy %s", pid, p, wantList, wantBusy)
		}
	}
}
