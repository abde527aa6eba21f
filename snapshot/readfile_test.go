package snapshot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

func TestReadBounded(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	data := strings.Repeat("0123456789", 10)
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		max  int64
		tail bool
		want string
	}{
		{"start", 15, false, data[:15]},
		{"end", 15, true, data[len(data)-15:]},
		{"whole from the start", 1000, false, data},
		{"whole from the end", 1000, true, data},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sink.ReadBounded(os.Open, path, tc.max, tc.tail)
			if err != nil || string(got) != tc.want {
				t.Errorf("got %q %v, want %q", got, err, tc.want)
			}
		})
	}
	_, err := readSmall(filepath.Join(dir, "none"))
	if err == nil || fileErr(err) != "missing" {
		t.Errorf("missing file: %v", err)
	}
}
