package sampler

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// A function's first refusal is logged with its attributes and takes it off
// until the re-probe; later refusals only re-probe; a field entry (FnNone)
// is never logged, its reading is absent; a success turns the entry on.
func TestCapCacheLogsTheFirstRefusalOnce(t *testing.T) {
	var logs bytes.Buffer
	c := &capCache{base: time.Now(), log: slog.New(slog.NewTextHandler(&logs, nil)), what: "reading"}
	var off int64
	for range 3 {
		if cl := c.note(FnFanSpeed, &off, nvml.ERROR_NOT_SUPPORTED, time.Hour, "fan", 1); cl != ClassNotSupported {
			t.Fatalf("class %v", cl)
		}
		if c.on(off) {
			t.Fatal("a refused call is on before its re-probe")
		}
	}
	c.note(FnNone, &off, nvml.ERROR_NO_PERMISSION, time.Hour)
	c.note(FnThreshold, &off, nvml.ERROR_NOT_SUPPORTED, time.Hour)
	got := logs.String()
	if n := strings.Count(got, "not available; will re-probe"); n != 2 ||
		!strings.Contains(got, "function="+FnFanSpeed.String()+" fan=1 reason=") || !strings.Contains(got, "function="+FnThreshold.String()) {
		t.Errorf("want one line each for %s (with fan=1) and %s, none for a field entry:\n%s", FnFanSpeed, FnThreshold, got)
	}
	if c.note(FnFanSpeed, &off, nvml.SUCCESS, time.Hour); off != 0 || !c.on(off) {
		t.Errorf("a success left the entry off: %d", off)
	}
}
