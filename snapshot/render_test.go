package snapshot

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

func thresholds() reading.Thresholds {
	return reading.Thresholds{
		Shutdown: reading.Some[uint32](92),
		Slowdown: reading.Some[uint32](89),
		GPUMax:   reading.Some[uint32](87),
		// MemMax absent: prints n/a
	}
}

func TestLastLines(t *testing.T) {
	out := []byte("a nvidia\nb\r\nc NVRM\nd\ne GPU\n")
	tests := []struct {
		name string
		keep func(string) bool
		n    int
		want []string
	}{
		{"all", nil, 0, []string{"a nvidia", "b", "c NVRM", "d", "e GPU"}},
		{"tail", nil, 2, []string{"d", "e GPU"}},
		{"matching", kernelFilter{}.GPULine, 0, []string{"a nvidia", "c NVRM", "e GPU"}},
		{"last matching", kernelFilter{}.GPULine, 2, []string{"c NVRM", "e GPU"}},
		{"none", kernelFilter{}.AERLine, 5, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := lastLines(out, tt.keep, tt.n); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	if got := lastLines(nil, nil, 5); got != nil {
		t.Errorf("empty output: %q", got)
	}
}

func TestSectionBodies(t *testing.T) {
	raw := func(r result) string { return filtered(r, nil, 0) } // a command's whole output
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"raw ok", raw(result{out: []byte("x")}), "x\n"},
		{"raw empty", raw(result{}), "(no output)\n"},
		{"raw failed", raw(result{out: []byte("err text\n"), status: "(failed: x)"}), "err text\n(failed: x)\n"},
		{"raw failed silent", raw(result{status: "(failed: x)"}), "(failed: x)\n"},
		{"filtered none", filtered(result{out: []byte("x\n")}, kernelFilter{}.AERLine, 5), "(no matching lines)\n"},
		{"filtered failed", filtered(result{status: "(timed out after 5s)"}, kernelFilter{}.AERLine, 5), "(timed out after 5s)\n"},
		{"filtered partial", filtered(result{out: []byte("pcieport 0000:00:01.0: AER: x\n"), status: "(timed out after 5s)"}, kernelFilter{}.AERLine, 5), "pcieport 0000:00:01.0: AER: x\n(timed out after 5s)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}

func TestRowsKeepLast50(t *testing.T) {
	var b strings.Builder
	writeTail(&b, "Last 50 telemetry readings", "(no readings yet)", "h", testRows(80))
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 1+1+50 {
		t.Fatalf("%d lines, want title, header and 50 rows", len(lines))
	}
	if want := " " + testRows(80)[30]; lines[2] != want {
		t.Errorf("first row %q, want %q", lines[2], want)
	}
}

func TestSpikeAbsentValues(t *testing.T) {
	got := string(renderSpike(&SpikeRequest{Columns: []string{"a", "b"}, Values: []string{"0", ""}}))
	for _, want := range []string{" a: 0\n", " b: n/a\n", " shutdown: n/a\n", "(no fans reported)"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}
