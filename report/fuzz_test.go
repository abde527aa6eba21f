package report

import (
	"strings"
	"testing"
	"time"
)

// FuzzParseRow: a CSV line never panics the reader, and a line that parses
// has a real timestamp and absent cells stay absent.
func FuzzParseRow(f *testing.F) {
	f.Add(strings.TrimSuffix(rowLine(time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC), 50, ""), "\n"))
	f.Add(strings.TrimSuffix(rowLine(time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC), 50, `"NVML_HUNG(nvmlDeviceGetPowerUsage,1200ms)"`), "\n"))
	f.Add("2026-11-30T01:02:03.000Z,,,,,,,,,,,,,,,,,,,,,,,,,,,,")
	f.Add(`2026-11-30T01:02:03.000Z,"a""b`)
	l, err := parseLayout(header)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, line string) {
		r, _, ok := l.parseRow(line, nil)
		if !ok {
			return
		}
		if r.Time.IsZero() {
			t.Errorf("parsed %q without a time", line)
		}
		cells, _ := splitCSV(line, nil)
		if cells[1] == "" && r.Temp.OK {
			t.Errorf("empty temperature cell read as %v", r.Temp.V)
		}
	})
}

// FuzzParseEventLine: an events.log line never panics the reader.
func FuzzParseEventLine(f *testing.F) {
	f.Add(`2026-11-30T19:08:17.623Z gpu=0 bus=00000000:01:00.0 source=nvml type=Xid xid=62 name="Internal micro-controller halt"`)
	f.Add(`2026-11-30T08:00:00.000Z gpu=? source=start type=UNCLEAN_STOP last_row=2026-11-30T07:12:03.400Z`)
	f.Add(`2026-11-30T08:00:00.000Z gpu=1 type=AER text="a \"quoted\" line"`)
	f.Fuzz(func(t *testing.T, line string) {
		e, ok := parseEventLine(line)
		if !ok {
			return
		}
		if e.Type == "" || e.Time.IsZero() || e.GPU < -1 {
			t.Errorf("parseEventLine(%q) = %+v", line, e)
		}
		_ = e.describe()
		_ = e.critical()
	})
}
