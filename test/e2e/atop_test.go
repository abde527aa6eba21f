package e2e

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/live/atop/atoptest"
)

// sleeper starts `sleep` as a real process to script onto a GPU.
func sleeper(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// TestAtopSeesScriptedGPUsAndProcesses runs gpu-telemetry --atop on two
// simulated GPUs with known busy %, memory and processes (real PIDs of
// processes this test started), then reads them with Debian's atop (API
// version 1, TCP) and with a client parsing as atop 2.13's gpucom.c (API
// version 2, abstract socket).
func TestAtopSeesScriptedGPUsAndProcesses(t *testing.T) {
	bin := testutil.NeedTool(t, "atop", "atop")
	atoptest.LockPort(t)
	p0, p1 := sleeper(t), sleeper(t)
	p := start(t, opts{args: []string{"--atop"}, scenario: fmt.Sprintf(`gpus 2
gpu 0 name "NVIDIA H100 80GB HBM3"
gpu 0 mem_total 81559
gpu 0 util_gpu 63
gpu 0 util_mem 21
gpu 0 mem_used 20480
gpu 1 util_gpu 7
gpu 1 util_mem 2
gpu 1 mem_used 1024
gpu 0 proc %d mem 8192 sm 55 memutil 27
gpu 1 proc %d graphics mem 512 sm 6 memutil 3
`, p0, p1)})
	p.waitFor("the atop listeners", 20*time.Second, func() bool {
		return strings.Count(p.stderr.String(), "serving atopgpud protocol") == 2
	})
	time.Sleep(2 * time.Second) // a couple of seconds accumulated, process lists read

	t.Run("atop 2.8.1 (v1)", func(t *testing.T) {
		out := atoptest.Run(t, bin, "-k", "-a", "-P", "GPU,PRE", "1", "2")
		gpus, pre := map[string][]string{}, map[int][]string{}
		for _, g := range atoptest.Parseable(out, "GPU") {
			gpus[g[0]] = g
		}
		for _, r := range atoptest.Parseable(out, "PRE") {
			if pid, _ := strconv.Atoi(r[0]); pid == p0 || pid == p1 {
				pre[pid] = r
			}
		}
		// gpunum busid type busy membusy memtotal memused ...
		want := map[string][]string{
			"0": {"0", "0000:01:00.0", "_80GB_HBM3", "63", "21", strconv.Itoa(81559 * 1024), strconv.Itoa(20480 * 1024)},
			"1": {"1", "0000:21:00.0", "", "7", "2", "", strconv.Itoa(1024 * 1024)},
		}
		for n, w := range want {
			g := gpus[n]
			if len(g) < 7 || g[1] != w[1] || !strings.HasSuffix(g[2], w[2]) || g[3] != w[3] || g[4] != w[4] ||
				(w[5] != "" && g[5] != w[5]) || g[6] != w[6] {
				t.Errorf("GPU %s: atop shows %q, want %q\n%s", n, g, w, out)
			}
		}
		// PID (name) state gpustate nrgpus gpulist busy membusy memnow ...
		for i, pid := range []int{p0, p1} {
			r := pre[pid]
			busy := []string{"55", "6"}[i]
			mem := []string{strconv.Itoa(8192 * 1024), strconv.Itoa(512 * 1024)}[i]
			if len(r) < 10 || r[1] != "(sleep)" || r[3] != "A" || r[5] != strconv.Itoa(1<<i) || r[6] != busy || r[8] != mem {
				t.Errorf("pid %d: PRE %q, want active on GPU %d with busy %s and %s KiB\n%s", pid, r, i, busy, mem, out)
			}
		}
	})

	t.Run("gpucom.c 2.13 (v2)", func(t *testing.T) {
		cl, err := atoptest.Dial("unix", "@atopgpud_nvidia", 2)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if len(cl.GPUs) != 2 || cl.GPUs[0].Type != "NVIDIA_H100_80GB_HBM3" || cl.GPUs[0].Tasks != '1' {
			t.Fatalf("types %+v", cl.GPUs)
		}
		gpus, first, err := cl.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if g := gpus[0]; g.BusyNow != 63 || g.MemBusyNow != 21 || g.MemTotal != 81559*1024 || g.MemUsed != 20480*1024 || g.Samples < 2 {
			t.Errorf("GPU 0 %+v", g)
		}
		// Version 2 sends busy % summed over the samples; atop 2.13 shows the
		// growth of the sum over the growth of the samples between two
		// requests, so ask again once the samples have grown.
		var procs []atoptest.Proc
		deadline := time.Now().Add(20 * time.Second)
		for len(procs) == 0 || len(first) != 2 || procs[0].Sample == first[0].Sample {
			if time.Now().After(deadline) {
				t.Fatalf("process samples did not grow: first %+v, then %+v", first, procs)
			}
			time.Sleep(500 * time.Millisecond)
			if _, procs, err = cl.Stats(); err != nil {
				t.Fatal(err)
			}
		}
		if len(procs) != 2 || procs[0].PID != int64(p0) || procs[0].GPU != 0 || procs[0].Kind != 'C' ||
			procs[1].PID != int64(p1) || procs[1].GPU != 1 || procs[1].Kind != 'G' || procs[1].MemNow != 512*1024 {
			t.Fatalf("processes %+v", procs)
		}
		if n := procs[0].Sample - first[0].Sample; procs[0].GPUBusy-first[0].GPUBusy != 55*n || procs[0].MemBusy-first[0].MemBusy != 27*n {
			t.Errorf("process %d over %d samples: busy %d -> %d, memory busy %d -> %d; want 55 and 27 per sample",
				p0, n, first[0].GPUBusy, procs[0].GPUBusy, first[0].MemBusy, procs[0].MemBusy)
		}
	})
}

// TestCrashSnapshotNamesProcesses: GPU 0 hangs with a job on it; the crash
// snapshot, taken while NVML is stuck, names the job from the last
// successful process read.
func TestCrashSnapshotNamesProcesses(t *testing.T) {
	t.Parallel()
	pid := sleeper(t)
	p := start(t, opts{scenario: fmt.Sprintf(`gpus 2
gpu 0 proc %d mem 30000 sm 97 memutil 41
at 4 gpu 0 hang 20s
`, pid)})
	var snap string
	p.waitFor("the hang's crash snapshot", 30*time.Second, func() bool {
		m := snapshots(p.dir, "crash-*-gpu0.log")
		if len(m) == 0 {
			return false
		}
		b, _ := os.ReadFile(m[0])
		snap = string(b)
		return strings.Contains(snap, "=== Processes on this GPU ===")
	})
	sec := snap[strings.Index(snap, "=== Processes on this GPU ==="):]
	want := []string{
		"s before this snapshot: 1 process(es)",
		fmt.Sprintf("%8d  compute", pid),
		"30000 MiB",
		"sleep: sleep 300",
	}
	for _, w := range want {
		if !strings.Contains(sec, w) {
			t.Errorf("processes section lacks %q:\n%s", w, sec)
		}
	}
}

// TestAtopPortTakenCarriesOn: with atopgpud's port already taken, --atop
// logs one line, serves the abstract socket, and the logger keeps writing.
func TestAtopPortTakenCarriesOn(t *testing.T) {
	atoptest.LockPort(t)
	held, err := net.Listen("tcp", "127.0.0.1:59123")
	switch {
	case err == nil:
		defer held.Close()
	case errors.Is(err, syscall.EADDRINUSE):
		// On the host's loopback (no network namespace of our own),
		// another program holds it: the case under test all the same.
		t.Logf("port 59123 is held by another program: %v", err)
	default:
		t.Fatalf("cannot take the port for the test: %v", err)
	}
	p := start(t, opts{args: []string{"--atop"}, scenario: "gpus 1\n"})
	p.waitFor("rows and the unix listener", 20*time.Second, func() bool {
		return rowCount(p.csvFile(0)) >= 10 && strings.Contains(p.stderr.String(), "addr=@atopgpud_nvidia")
	})
	if n := strings.Count(p.stderr.String(), "cannot listen"); n != 1 {
		t.Errorf("%d lines about the taken port, want 1:\n%s", n, p.stderr)
	}
	cl, err := atoptest.Dial("unix", "@atopgpud_nvidia", 2)
	if err != nil {
		t.Fatalf("abstract socket not served: %v", err)
	}
	cl.Close()
}
