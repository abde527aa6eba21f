package snapshot

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// Header is the block at the top of every snapshot: what GPU, why, and the
// daemon's state at that moment. Text fields left empty print as "n/a".
type Header struct {
	Title       string               // e.g. "GPU CRASH DETECTED"; empty: the Manager fills in the kind's title
	Time        time.Time            // when it happened; zero: the Manager uses the time it accepted the request
	Version     string               // daemon version, e.g. "gpu-telemetry 1.0.0"
	Host        reading.Identity     // the host: name, machine id, boot id
	GPUIndex    int                  // NVML index; the Manager sets it from the gpu argument; negative prints n/a
	GPUName     string               // "NVIDIA H100 80GB HBM3"
	BusID       string               // NVML form: 00000000:4B:00.0
	UUID        string               // GPU-...
	Serial      string               // the board's serial number (its RMA name); "" unknown
	Reason      string               // "Xid 79: GPU has fallen off the bus (kmsg)", "NVML_HUNG(nvmlDeviceGetPowerUsage,2300ms)"
	Headline    string               // crash only: the incident named by its worst events ("GPU 0: GSP RPC Timeout (Xid 119); started with ..."); set by the Manager, not printed when empty
	Action      string               // the GPU's repair action then, with its reasons ("reboot: Xid 79 ..."); not printed when empty
	KernelClock string               // how dmesg_time relates to the kernel log's clock (kclock.Fit.Describe)
	Uptime      time.Duration        // daemon uptime; printed to the second
	Samples     uint64               // samples taken of this GPU so far (0 is a real count)
	PeakTempC   reading.Opt[uint32]  // hottest reading so far; absent before the first one
	PeakPowerW  reading.Opt[float64] // highest power draw so far
	EventNumber uint64               // this incident's number, counting from 1; 0 means not counted (n/a)
	Counters    []Counter            // anomaly totals, printed in the given order
	Suppressed  uint64               // snapshots suppressed by the cooldown so far; set by the Manager
	FanGuard    string               // the fan guard's state ("holding fans 0,1 at 78 % (firmware wanted 53 %), 73 °C"); "" without --fan-guard: no line
}

// Counter is one anomaly total shown in the header.
type Counter struct {
	Name  string // short name, after gpu-telemetry-deep.py's header line (Pwr breach, Fan inv, Spur throt): pwr_breach, fan_inv, spur_throt, spikes, tdp_changes ...
	Total uint64
}

// na is printed for an absent value: never 0, which would be a real reading.
const na = "n/a"

// orNA returns s, or "n/a" when s is empty.
func orNA(s string) string { return cmp.Or(s, na) }

// optf formats o's value with format, or is "n/a" when o is absent.
func optf[T any](format string, o reading.Opt[T]) string {
	if v, ok := o.Get(); ok {
		return fmt.Sprintf(format, v)
	}
	return na
}

// writeHeader writes h in the order of gpu-telemetry-deep.py's
// _write_snapshot_header (title, time, version, GPU, reason, uptime and
// samples, peaks, event number, its detectors' counters, here one Counters
// line), adding the host, the board, the headline, the kernel log's clock
// and the suppressed count.
func writeHeader(b *strings.Builder, h *Header) {
	writeTop(b, h, "")
	event := na
	if h.EventNumber != 0 {
		event = strconv.FormatUint(h.EventNumber, 10)
	}
	fmt.Fprintf(b, "Kernel log clock: %s\nUptime: %s, %d samples\nPeaks: %s / %s\nEvent #: %s\nCounters:",
		orNA(h.KernelClock), h.Uptime.Truncate(time.Second), h.Samples, optf("%dC", h.PeakTempC), optf("%.0fW", h.PeakPowerW), event)
	if len(h.Counters) == 0 {
		b.WriteString(" " + na)
	}
	for _, c := range h.Counters {
		fmt.Fprintf(b, " %s=%d", orNA(c.Name), c.Total)
	}
	fmt.Fprintf(b, "\nSuppressed by cooldown: %d\n", h.Suppressed)
	if h.FanGuard != "" {
		b.WriteString("Fan guard: " + h.FanGuard + "\n")
	}
	b.WriteString("\n")
}

// ParseHeader reads back the Title, Time, GPU index, UUID, serial, Reason, Headline and Action of a header
// writeHeader wrote at the start of text, up to the empty line that ends it;
// the other fields stay zero, and GPUIndex is -1 when the GPU line says n/a.
// ok is false when there is no readable Time line.
func ParseHeader(text string) (h Header, ok bool) {
	h.GPUIndex = -1
	texts := map[string]*string{"UUID": &h.UUID, "Serial": &h.Serial, "Reason": &h.Reason, "Headline": &h.Headline, "Action": &h.Action}
	for _, l := range strings.SplitN(text, "\n", 20) {
		if l == "" {
			return h, ok
		}
		if strings.HasPrefix(l, "=== ") && strings.HasSuffix(l, " ===") {
			h.Title = strings.TrimSuffix(strings.TrimPrefix(l, "=== "), " ===")
			continue
		}
		k, v, _ := strings.Cut(l, ": ")
		if p := texts[k]; p != nil {
			*p = v
		}
		switch k {
		case "Time":
			// RFC 3339 reads sink.TimestampLayout and the isoformat() times
			// of gpu-telemetry-deep.py's snapshots alike.
			if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
				h.Time, ok = t, true
			}
		case "GPU":
			if f := strings.Fields(v); len(f) > 0 {
				if n, err := strconv.Atoi(f[0]); err == nil {
					h.GPUIndex = n
				}
			}
		}
	}
	return h, ok
}

// writeTop writes the lines every snapshot, follow-ups included, begins
// with: the title, time and version; where it was taken: the host, the GPU
// ("GPU: 3 NVIDIA H100 80GB HBM3 (00000000:4B:00.0)"), and the board, by the
// UUID and serial number an RMA asks for (each n/a when unknown; ParseHeader
// reads n/a back as it is: no UUID or serial is n/a); then extra, the reason,
// and the headline and the GPU's repair action (when there are).
func writeTop(b *strings.Builder, h *Header, extra string) {
	at, gpu := na, na
	if !h.Time.IsZero() {
		at = h.Time.Format(sink.TimestampLayout)
	}
	if h.GPUIndex >= 0 {
		gpu = strconv.Itoa(h.GPUIndex)
	}
	fmt.Fprintf(b, "=== %s ===\nTime: %s\nVersion: %s\nHost: %s (machine id %s, boot %s)\nGPU: %s %s (%s)\nUUID: %s\nSerial: %s\n%sReason: %s\n",
		orNA(h.Title), at, orNA(h.Version), orNA(h.Host.Host), orNA(h.Host.MachineID), orNA(h.Host.BootID),
		gpu, orNA(h.GPUName), orNA(h.BusID), orNA(h.UUID), orNA(h.Serial), extra, orNA(h.Reason))
	if h.Headline != "" {
		b.WriteString("Headline: " + h.Headline + "\n")
	}
	if h.Action != "" {
		b.WriteString("Action: " + h.Action + "\n")
	}
}
