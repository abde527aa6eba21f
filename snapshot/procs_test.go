package snapshot

import (
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

func TestProcessesSection(t *testing.T) {
	read := incidentTime.Add(-1500 * time.Millisecond)
	good := &reading.Procs{GPU: 0, Time: read, Status: reading.ProcOK, List: []reading.Process{
		{PID: 4242, Kind: reading.ProcCompute, MemBytes: reading.Some(uint64(30000) << 20),
			SMUtil: reading.Some(uint32(97)), MemUtil: reading.Some(uint32(41)),
			Origin: reading.ProcHere, Name: "python3", Cmdline: "python3 train.py --epochs 90",
			Workload: reading.Workload{Known: true, Unit: "slurmstepd.scope", SlurmJob: "81723", SlurmStep: "0"}},
		{PID: 4300, Kind: reading.ProcCompute | reading.ProcGraphics, Origin: reading.ProcGone},
		{PID: 77, Kind: reading.ProcGraphics, MemBytes: reading.Some(uint64(12) << 20),
			Origin: reading.ProcHere, Name: "Xorg", Cmdline: strings.Repeat("x", 20), CmdlineTrunc: true},
		{PID: 9, Kind: reading.ProcCompute, Origin: reading.ProcOtherNS},
		{PID: 5150, Kind: reading.ProcCompute, Origin: reading.ProcHere, Name: "pt_main_thread", Cmdline: "torchrun",
			Workload: reading.Workload{Known: true, Unit: "cri-containerd-4f1d2b3c5e6a7980.scope", ContainerID: "4f1d2b3c5e6a7980a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718", PodUID: "0e3a1f2c-4b5d-4c6e-8f70-123456789abc"}},
		{PID: 5151, Kind: reading.ProcCompute, Origin: reading.ProcHere, Name: "bash", Cmdline: "bash", Workload: reading.Workload{Known: true}},
	}}
	hung := &reading.Procs{GPU: 0, Time: incidentTime.Add(-2 * time.Second), Status: reading.ProcHung,
		Err: "nvmlDeviceGetComputeRunningProcesses stuck", LastOK: good}
	cases := []struct {
		name string
		p    *reading.Procs
	}{
		{"ok", good},
		{"hung-last-good", hung},
		{"hung-never-good", &reading.Procs{Time: incidentTime.Add(-3 * time.Second), Status: reading.ProcHung, Err: "nvmlDeviceGetComputeRunningProcesses stuck"}},
		{"unsupported", &reading.Procs{Status: reading.ProcUnsupported, Err: "process lists not available from this driver"}},
		{"not-read", &reading.Procs{Status: reading.ProcNotRead}},
		{"none-running", &reading.Procs{Time: read, Status: reading.ProcOK}},
	}
	var all strings.Builder
	for _, tc := range cases {
		s := ProcessesSection(tc.p, incidentTime)
		if s.Title != ProcessesTitle {
			t.Errorf("%s: title %q", tc.name, s.Title)
		}
		all.WriteString("--- " + tc.name + "\n" + s.Body)
	}
	testutil.Golden(t, "processes.golden", []byte(all.String()))
}
