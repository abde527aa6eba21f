package snapshot

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// SpikeRequest is one spike snapshot, complete: the decision that accepted
// it and what the caller holds in memory when a fan spikes.
type SpikeRequest struct {
	Decision    Decision // from DecideSpike, accepted
	Header      Header
	Columns     []string           // the CSV's column names
	Values      []string           // the current row, one cell per column; an empty cell is absent and prints n/a
	CSVHeader   string             // the CSV's header line
	Rows        []string           // that GPU's last rows as CSV lines, oldest first; the last 50 are kept
	Thresholds  reading.Thresholds // the GPU's temperature thresholds, read at start
	FanPolicies []string           // one per fan, as the caller renders it ("continuous", "n/a" ...)
}

// spikeTitle is gpu-telemetry-deep.py's title for a spike snapshot.
const spikeTitle = "FAN SPIKE DETECTED"

// Spike writes the spike snapshot of req, whose Decision DecideSpike
// accepted, in the background. It reports false when it writes nothing (see
// Crash).
func (m *Manager) Spike(req SpikeRequest) bool {
	d := req.Decision
	if !d.Accepted || !m.hand() {
		return false
	}
	req.Header.fill(d.gpu, d.Suppressed, spikeTitle, d.at)
	go func() {
		defer m.wg.Done()
		m.flush(d.gpu)
		m.save("spike", d.gpu, 0, filepath.Join(m.cfg.Dir, SpikeDir), baseName("spike", d.at, d.gpu), renderSpike(&req), time.Now(), spikesWritten)
	}()
	return true
}

// renderSpike renders a spike snapshot: gpu-telemetry-deep.py's
// _write_spike_snapshot (the current row as name: value, the last 50 rows,
// the thermal thresholds and the fan policies, which it read from NVML
// there and then), with the thresholds and policies from the caller's
// memory: no NVML call on a GPU that may be failing.
func renderSpike(req *SpikeRequest) []byte {
	var cur, th, fans strings.Builder
	n := max(len(req.Columns), len(req.Values))
	if n == 0 {
		cur.WriteString("(no current row)\n")
	}
	for i := range n {
		name, val := "", ""
		if i < len(req.Columns) {
			name = req.Columns[i]
		}
		if i < len(req.Values) {
			val = req.Values[i]
		}
		cur.WriteString(" " + orNA(name) + ": " + orNA(val) + "\n")
	}
	t := req.Thresholds
	fmt.Fprintf(&th, " shutdown: %s\n slowdown: %s\n mem_max: %s\n gpu_max: %s\n",
		optf("%dC", t.Shutdown), optf("%dC", t.Slowdown), optf("%dC", t.MemMax), optf("%dC", t.GPUMax))
	if len(req.FanPolicies) == 0 {
		fans.WriteString("(no fans reported)\n")
	}
	for i, p := range req.FanPolicies {
		fans.WriteString(" fan[" + strconv.Itoa(i) + "]: policy=" + orNA(p) + "\n")
	}
	return render(&req.Header, Section{"Current state", cur.String()}, req.CSVHeader, req.Rows,
		[]Section{{"Thermal thresholds", th.String()}, {"Fan control policies", fans.String()}}, "End of snapshot")
}
