package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/test/simnvml/internal/nvmlsyms"
)

// generate returns the simnvml directory and the stubs the generator
// writes now.
func generate(t *testing.T) (root string, src []byte) {
	t.Helper()
	root, err := nvmlsyms.FindSimDir("")
	if err != nil {
		t.Fatal(err)
	}
	src, err = Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, src
}

// TestStubsUpToDate fails when csrc/stubs_gen.c differs from what the
// generator produces now (go-nvml upgraded, a function modelled or
// old_driver.txt edited without rerunning `go run ./gen`).
func TestStubsUpToDate(t *testing.T) {
	root, want := generate(t)
	have, err := os.ReadFile(filepath.Join(root, nvmlsyms.StubsFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, want) {
		t.Fatalf("%s is out of date: run `go run ./gen` in simnvml/", nvmlsyms.StubsFile)
	}
}

// TestStubsCoverGoNvml checks the partition: every symbol go-nvml calls is
// either hand-written or stubbed, never both.
func TestStubsCoverGoNvml(t *testing.T) {
	root, src := generate(t)
	lists, err := nvmlsyms.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	hand := lists.Hand
	for _, s := range lists.GoNvml {
		stubbed := strings.Contains(string(src), "int "+s+"(void)")
		if stubbed == hand[s] {
			t.Errorf("%s: hand-written %v, stubbed %v", s, hand[s], stubbed)
		}
	}
	for _, s := range []string{"nvmlInit_v2", "nvmlDeviceGetFieldValues", "nvmlEventSetWait_v2", "nvmlErrorString"} {
		if !hand[s] {
			t.Errorf("%s not detected as hand-written", s)
		}
	}
}
