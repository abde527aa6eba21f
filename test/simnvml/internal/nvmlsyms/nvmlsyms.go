// Package nvmlsyms answers which NVML functions the simulated driver must
// export and how: every function go-nvml can call (read from go-nvml's
// nvml.go), those csrc/*.c write by hand (checked against csrc/fns.h), and
// those the old-driver build leaves out (csrc/old_driver.txt). The stub
// generator (gen) and the simnvml tests both read them here, so the two
// cannot disagree about the lists.
package nvmlsyms

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// goNvmlModule is the module whose nvml.go lists the callable symbols.
const goNvmlModule = "github.com/NVIDIA/go-nvml"

// goNvmlFallbackVersion is used when `go list -m` cannot resolve the module
// (for example when the main module does not require it yet). Keep in sync
// with the Makefile.
const goNvmlFallbackVersion = "v0.13.4-1"

// StubsFile is the generated file of stubs, relative to the simnvml
// directory; handWritten skips it.
const StubsFile = "csrc/stubs_gen.c"

var (
	callRe = regexp.MustCompile(`\bC\.(nvml[A-Za-z0-9_]*)\(`)
	// A definition starts in column 0 with the return type; prototypes
	// of NVML functions are never written in the hand-written files.
	// or through device.c's ANSWER and ANSWER_STR macros, or health.c's
	// FABRIC_CALL.
	defRe   = regexp.MustCompile(`(?m)^(?:(?:nvmlReturn_t|const char \*)\s*(nvml[A-Za-z0-9_]+)\s*\([^;]*|(?:ANSWER\w*|FABRIC_CALL)\((nvml[A-Za-z0-9_]+)[,)].*)$`)
	simfnRe = regexp.MustCompile(`(?m)^SIMFN\((nvml[A-Za-z0-9_]+)\)`)
)

// FindSimDir returns the simnvml directory: dir if given, else . or ..
// whichever contains csrc/fns.h.
func FindSimDir(dir string) (string, error) {
	cands := []string{".", ".."}
	if dir != "" {
		cands = []string{dir}
	}
	for _, c := range cands {
		if _, err := os.Stat(filepath.Join(c, "csrc", "fns.h")); err == nil {
			return filepath.Abs(c)
		}
	}
	return "", errors.New("cannot find the simnvml directory (no csrc/fns.h); use -dir")
}

// goNvmlDir returns the root directory of the go-nvml module: from
// $SIMNVML_GO_NVML_DIR, `go list -m`, or the module cache at the pinned
// fallback version.
func goNvmlDir(simDir string) (string, error) {
	if d := os.Getenv("SIMNVML_GO_NVML_DIR"); d != "" {
		return d, nil
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", goNvmlModule)
	cmd.Dir = simDir
	if out, err := cmd.Output(); err == nil {
		if d := strings.TrimSpace(string(out)); d != "" {
			if _, err := os.Stat(filepath.Join(d, "pkg", "nvml", "nvml.go")); err == nil {
				return d, nil
			}
		}
	}
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMODCACHE: %w", err)
	}
	d := filepath.Join(strings.TrimSpace(string(out)), "github.com", "!n!v!i!d!i!a", "go-nvml@"+goNvmlFallbackVersion)
	if _, err := os.Stat(filepath.Join(d, "pkg", "nvml", "nvml.go")); err != nil {
		return "", fmt.Errorf("cannot locate %s (tried go list -m and %s): %w", goNvmlModule, d, err)
	}
	return d, nil
}

// nvmlSymbols returns, sorted, every C.nvmlXxx( symbol in go-nvml's nvml.go.
func nvmlSymbols(moduleDir string) ([]string, error) {
	src, err := os.ReadFile(filepath.Join(moduleDir, "pkg", "nvml", "nvml.go"))
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, m := range callRe.FindAllStringSubmatch(string(src), -1) {
		set[m[1]] = true
	}
	return sortedKeys(set), nil
}

// handWritten returns the NVML functions defined in csrc/*.c (except the
// generated file), and checks them against the SIMFN list in csrc/fns.h.
func handWritten(simDir string) (map[string]bool, error) {
	files, err := filepath.Glob(filepath.Join(simDir, "csrc", "*.c"))
	if err != nil {
		return nil, err
	}
	defs := map[string]bool{}
	for _, f := range files {
		if filepath.Base(f) == filepath.Base(StubsFile) {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, m := range defRe.FindAllStringSubmatch(string(src), -1) {
			defs[m[1]+m[2]] = true
		}
	}
	fns, err := os.ReadFile(filepath.Join(simDir, "csrc", "fns.h"))
	if err != nil {
		return nil, err
	}
	listed := map[string]bool{}
	for _, m := range simfnRe.FindAllStringSubmatch(string(fns), -1) {
		listed[m[1]] = true
	}
	for name := range defs {
		if !listed[name] {
			return nil, fmt.Errorf("%s is defined in csrc/*.c but missing from csrc/fns.h", name)
		}
	}
	for name := range listed {
		if !defs[name] {
			return nil, fmt.Errorf("%s is listed in csrc/fns.h but not defined in csrc/*.c", name)
		}
	}
	return defs, nil
}

// oldDriverExcluded reads csrc/old_driver.txt.
func oldDriverExcluded(simDir string) ([]string, error) {
	src, err := os.ReadFile(filepath.Join(simDir, "csrc", "old_driver.txt"))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, line := range strings.Split(string(src), "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		if line = strings.TrimSpace(line); line != "" {
			names = append(names, line)
		}
	}
	return names, nil
}

// sortedKeys returns the keys of m in order.
func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Lists are the symbol lists of one simnvml directory.
type Lists struct {
	GoNvml []string        // every NVML function go-nvml can call, sorted
	Hand   map[string]bool // those csrc/*.c define by hand
	Old    map[string]bool // those the old-driver build leaves out
}

// Load reads the lists of the simnvml directory simDir. A function
// old_driver.txt names that go-nvml does not call is an error: the
// old-driver build could not leave it out.
func Load(simDir string) (Lists, error) {
	nvmlDir, err := goNvmlDir(simDir)
	if err != nil {
		return Lists{}, err
	}
	l := Lists{Old: map[string]bool{}}
	if l.GoNvml, err = nvmlSymbols(nvmlDir); err != nil {
		return Lists{}, err
	}
	if l.Hand, err = handWritten(simDir); err != nil {
		return Lists{}, err
	}
	old, err := oldDriverExcluded(simDir)
	if err != nil {
		return Lists{}, err
	}
	all := map[string]bool{}
	for _, s := range l.GoNvml {
		all[s] = true
	}
	for _, s := range old {
		if !all[s] {
			return Lists{}, fmt.Errorf("csrc/old_driver.txt: %s is not a function go-nvml calls", s)
		}
		l.Old[s] = true
	}
	return l, nil
}
