package live_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	. "github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/livetest"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// TestProcessesInStatus: the status screen and document list each GPU's
// processes; a hung read keeps the last successful list and says so.
func TestProcessesInStatus(t *testing.T) {
	v := livetest.View()
	now := v.Host.Now
	good := &reading.Procs{GPU: 0, Time: now.Add(-800 * time.Millisecond), Status: reading.ProcOK, List: []reading.Process{
		{PID: 4242, Kind: reading.ProcCompute, MemBytes: reading.Some(uint64(30000) << 20), SMUtil: reading.Some(uint32(97)),
			MemUtil: reading.Some(uint32(41)), Origin: reading.ProcHere, Name: "python3", Cmdline: "python3 train.py"},
		{PID: 77, Kind: reading.ProcGraphics, Origin: reading.ProcOtherNS},
	}}
	v.GPUs[0].Processes = good
	v.GPUs[1].Processes = &reading.Procs{GPU: 1, Status: reading.ProcHung, Err: "nvmlDeviceGetComputeRunningProcesses stuck", LastOK: good}
	d := NewDoc(v)
	var b bytes.Buffer
	WriteText(&b, d)
	text := b.String()
	testutil.Contains(t, "status text", text,
		"  processes: 2\n",
		"    pid 4242 compute  mem 30000 MiB  sm 97% membusy 41%  python3: python3 train.py\n",
		"    pid 77 graphics  mem n/a  sm n/a membusy n/a  (other PID namespace)\n",
		"; now no data (hung: nvmlDeviceGetComputeRunningProcesses stuck)\n",
	)
	j, _ := json.Marshal(d)
	for _, want := range []string{`"processes":{"status":"ok","read_at":`, `"pid":4242,"type":"compute","memory_bytes":31457280000,"sm_util_pct":97`, `"status":"hung","error":"nvmlDeviceGetComputeRunningProcesses stuck"`} {
		if !strings.Contains(string(j), want) {
			t.Errorf("JSON lacks %s:\n%s", want, j)
		}
	}
}
