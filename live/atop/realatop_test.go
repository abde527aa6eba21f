package atop

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/live/atop/atoptest"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// TestMain runs the package's tests in a network namespace of their own
// (atoptest.OwnNetwork): TestRealAtop's server must own 127.0.0.1:59123.
func TestMain(m *testing.M) {
	if code, done := atoptest.OwnNetwork(); done {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// TestRealAtop serves scripted figures and reads them back through a real
// atop: Debian's atop 2.8.1 on 127.0.0.1:59123 (API version 1) and, when
// ATOP213 names one, an atop 2.13 on the abstract socket (API version 2).
// The GPU lines carry the busy %, memory and bus ids, and the PRE lines put
// the test's own processes on the right GPU with their figures.
func TestRealAtop(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version byte
		atop    func(t *testing.T) []string
	}{
		{"2.8.1 v1", 1, func(t *testing.T) []string { return []string{testutil.NeedTool(t, "atop", "atop")} }},
		{"2.13 v2", 2, needAtop213},
	} {
		t.Run(tc.name, func(t *testing.T) { readThroughAtop(t, tc.version, tc.atop(t)) })
	}
}

// needAtop213 returns the command that runs an atop 2.13 (the ATOP213
// environment variable, split on spaces: Debian stable has none, and sid's
// needs a newer C library than the build host; docs/atop.md shows how to
// run it), skipping the test when it is not set.
func needAtop213(t *testing.T) []string {
	cmd := strings.Fields(os.Getenv("ATOP213"))
	if len(cmd) == 0 {
		t.Skip("ATOP213 not set (a command running atop 2.13)")
	}
	return cmd
}

func readThroughAtop(t *testing.T, version byte, atop []string) {
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
	a := NewAccumulator(twoGPUs(), nil, counters.New())
	cfg := DefaultConfig()
	if version == 1 {
		cfg.Unix = ""
	} else {
		cfg.TCP = ""
	}
	srv := NewServer(a, cfg, nil, counters.New())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if addrs := srv.Start(ctx); len(addrs) != 1 {
		t.Fatal("the atopgpud address is taken (is atopgpud running?)")
	}
	defer srv.Close()
	graphics := proc(uint32(pids[1]), 6, 512)
	graphics.Kind = reading.ProcGraphics
	feed := func() {
		for range 10 {
			a.Sample(row(0, 63, 21, 20480))
			a.Sample(row(1, 7, 2, 1024))
		}
		a.Procs(procs(0, proc(uint32(pids[0]), 55, 8192)))
		a.Procs(procs(1, graphics))
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
	args := append(append([]string(nil), atop[1:]...), "-k", "-P", "GPU,PRE", "1", "3")
	if version == 1 {
		args = append(args, "-a") // 2.8.1 lists idle processes only with -a; 2.13 takes -a for something else
	}
	out := atoptest.Run(t, atop[0], args...)
	t.Logf("atop output:\n%s", out)
	gpuLines := atoptest.Parseable(out, "GPU")
	for _, g := range gpuLines {
		// GPU host epoch date time interval | gpunum busid type busy membusy total used samples busycum membusycum memusecum
		if len(g) < 11 {
			t.Fatalf("GPU line %q", g)
		}
		want := map[string][]string{
			"0": {"0000:01:00.0", "NVIDIA_RTX_PRO_6000_Blackwell", "63", "21", strconv.Itoa(97887 * 1024), strconv.Itoa(20480 * 1024)},
			"1": {"0000:21:00.0", "NVIDIA_B200", "7", "2", strconv.Itoa(97887 * 1024), "1048576"},
		}[g[0]]
		// atop keeps the last 12 characters of the bus id and of the type
		if want == nil || !strings.HasSuffix(want[0], g[1]) || len(g[1]) < 9 ||
			!strings.HasSuffix(want[1], g[2]) || len(g[2]) < min(12, len(want[1])) || g[3] != want[2] || g[4] != want[3] || g[5] != want[4] || g[6] != want[5] {
			t.Errorf("GPU line %q, want %v", g, want)
		}
	}
	if len(gpuLines) < 4 {
		t.Errorf("%d GPU lines, want 2 per interval", len(gpuLines))
	}
	preLines := map[int][]string{}
	for _, p := range atoptest.Parseable(out, "PRE") {
		pid, _ := strconv.Atoi(p[0])
		preLines[pid] = p
	}
	for i, pid := range pids {
		p := preLines[pid]
		// PID (name) state gpustate nrgpus gpulist gpubusy membusy memnow memcum samples [is_process kind: 2.13]
		if len(p) < 10 {
			t.Errorf("no PRE line for pid %d (GPU %d)", pid, i)
			continue
		}
		wantList := strconv.Itoa(1 << i)
		wantBusy, wantMemBusy := []string{"55", "6"}[i], []string{"27", "3"}[i]
		wantMem := strconv.Itoa([]int{8192, 512}[i] * 1024)
		if p[3] != "A" || p[4] != "1" || p[5] != wantList || p[6] != wantBusy || p[8] != wantMem {
			t.Errorf("pid %d: PRE %q, want state A on GPU bitlist %s, busy %s, %s KiB", pid, p, wantList, wantBusy, wantMem)
		}
		// Version 1's memory busy % is atopgpud's accounting figure, which
		// atop 2.8 does not print; 2.13 prints it, and the process kind.
		if version == 2 && (len(p) < 13 || p[7] != wantMemBusy || p[12] != []string{"C", "G"}[i]) {
			t.Errorf("pid %d: PRE %q, want memory busy %s and kind %s", pid, p, wantMemBusy, []string{"C", "G"}[i])
		}
	}
}
