package snapshot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// TestKernelFilterCorpus runs the filter over dmesg of real hosts
// (testdata/dmesg/*.log), each line marked with whether it belongs in the GPU
// section and in the AER section. The look-alikes that must stay out are
// there: "debug", "[Firmware Bug]", "CPU bug", other GPUs' drivers (i915,
// amdgpu) that print the word GPU, and AER reports of other devices,
// including one behind the GPU's own root port.
func TestKernelFilterCorpus(t *testing.T) {
	files, err := filepath.Glob("testdata/dmesg/*.log")
	if err != nil || len(files) < 3 {
		t.Fatalf("corpus: %v %v", files, err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var f kernelFilter
			var lines, kept, aer int
			for n, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
				if rest, ok := strings.CutPrefix(l, "# gpu "); ok {
					a, err := reading.ParsePCIAddr(rest)
					if err != nil {
						t.Fatal(err)
					}
					f.gpu = reading.Some(a)
					continue
				}
				if rest, ok := strings.CutPrefix(l, "# bridges "); ok {
					f.pathKnown = true
					for _, s := range strings.Fields(rest) {
						a, err := reading.ParsePCIAddr(s)
						if err != nil {
							t.Fatal(err)
						}
						f.bridges = append(f.bridges, a)
					}
					continue
				}
				if strings.HasPrefix(l, "#") {
					continue
				}
				if len(l) < 4 || l[2] != ' ' {
					t.Fatalf("line %d: no marks: %q", n+1, l)
				}
				line := l[3:]
				wantGPU, wantAER := l[0] == '+', l[1] == '+'
				lines++
				if wantGPU {
					kept++
				}
				if wantAER {
					aer++
				}
				if got := f.GPULine(line); got != wantGPU {
					t.Errorf("line %d: GPU section %v, want %v: %s", n+1, got, wantGPU, line)
				}
				if got := f.AERLine(line); got != wantAER {
					t.Errorf("line %d: AER section %v, want %v: %s", n+1, got, wantAER, line)
				}
			}
			if _, ok := f.gpu.Get(); !ok || kept == 0 || kept == lines || aer == 0 {
				t.Fatalf("corpus file without a GPU, or without lines in or out: %d lines, %d GPU, %d AER", lines, kept, aer)
			}
		})
	}
}

// TestKernelFilterPathUnknown: when sysfs does not say which bridges lead to
// the GPU, no PCIe port's AER report can be ruled out, and each is kept;
// another device's own lines still stay out.
func TestKernelFilterPathUnknown(t *testing.T) {
	f := kernelFilter{gpu: reading.Some(reading.PCIAddr{Bus: 1})}
	for _, tt := range []struct {
		line     string
		gpu, aer bool
	}{
		{"[ 1.0] pcieport 0000:00:1d.0: AER: Corrected error received: 0000:03:00.0", true, true},
		{"[ 1.0] pcieport 0000:00:1d.0:    [ 0] RxErr", true, true},
		{"[ 1.0] pcieport 0000:00:1d.0: pciehp: Slot(1): Link Down", false, false},
		{"[ 1.0] nvme 0000:03:00.0: AER: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)", false, false},
		{"[ 1.0] nvidia 0000:01:00.0: AER: can't recover (no error_detected callback)", true, true},
		{"[ 1.0] {2026-12-01T19:41:20.565Z} SGI XFS with ACLs, security attributes, no debug enabled", false, false},
		{"[ 1.0] {2026-12-01T19:41:20.565Z} NVRM: Xid (PCI:0000:01:00): 79, pid=1, GPU has fallen off the bus.", true, false},
		{"[ 1.0] NVRM: GPU 00000000:01:00.0 is gone", true, false},
		{"[ 1.0] something about 0000:01:00.0 here", true, false},
		{"[ 1.0] something about 0000:01:00.1 here", true, false},
		{"[ 1.0] something about 10000:01:00.0 here", false, false},
		{"[ 1.0] something about 0000:01:001 here", false, false},
	} {
		if got := f.GPULine(tt.line); got != tt.gpu {
			t.Errorf("GPU section %v, want %v: %s", got, tt.gpu, tt.line)
		}
		if got := f.AERLine(tt.line); got != tt.aer {
			t.Errorf("AER section %v, want %v: %s", got, tt.aer, tt.line)
		}
	}
}
