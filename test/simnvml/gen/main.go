// Command gen writes simnvml/csrc/stubs_gen.c: one stub returning
// NVML_ERROR_NOT_SUPPORTED for every NVML function go-nvml can call
// (every C.nvmlXxx( in go-nvml's pkg/nvml/nvml.go) that the hand-written C
// files in simnvml/csrc do not define.
//
// Stubs named in csrc/old_driver.txt are wrapped in #ifndef SIMNVML_OLD_DRIVER
// so the old-driver build does not export them.
//
// Usage, from simnvml/ (or simnvml/gen/):
//
//	go run ./gen          # rewrite csrc/stubs_gen.c
//	go run ./gen -check   # exit 1 if csrc/stubs_gen.c is out of date
package main

//go:generate go run .

import (
	"bytes"
	"errors"
	"flag"
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

// StubsFile is the generated file, relative to the simnvml directory.
const StubsFile = "csrc/stubs_gen.c"

var (
	callRe = regexp.MustCompile(`\bC\.(nvml[A-Za-z0-9_]*)\(`)
	// A definition starts in column 0 with the return type; prototypes
	// of NVML functions are never written in the hand-written files.
	// or through device.c's ANSWER and ANSWER_STR macros.
	defRe   = regexp.MustCompile(`(?m)^(?:(?:nvmlReturn_t|const char \*)\s*(nvml[A-Za-z0-9_]+)\s*\([^;]*|ANSWER\w*\((nvml[A-Za-z0-9_]+),.*)$`)
	simfnRe = regexp.MustCompile(`(?m)^SIMFN\((nvml[A-Za-z0-9_]+)\)`)
)

func main() {
	dir := flag.String("dir", "", "simnvml directory (default: . or .. whichever holds csrc/)")
	check := flag.Bool("check", false, "only check that the generated file is up to date")
	flag.Parse()

	root, err := FindSimDir(*dir)
	if err != nil {
		fatal(err)
	}
	want, err := Generate(root)
	if err != nil {
		fatal(err)
	}
	path := filepath.Join(root, StubsFile)
	if *check {
		have, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(have, want) {
			fatal(fmt.Errorf("%s is out of date: run `go run ./gen` in simnvml/", path))
		}
		return
	}
	if err := os.WriteFile(path, want, 0o644); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "gen:", err)
	os.Exit(1)
}

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

// GoNvmlDir returns the root directory of the go-nvml module: from
// $SIMNVML_GO_NVML_DIR, `go list -m`, or the module cache at the pinned
// fallback version.
func GoNvmlDir(simDir string) (string, error) {
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

// NvmlSymbols returns, sorted, every C.nvmlXxx( symbol in go-nvml's nvml.go.
func NvmlSymbols(goNvmlDir string) ([]string, error) {
	src, err := os.ReadFile(filepath.Join(goNvmlDir, "pkg", "nvml", "nvml.go"))
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, m := range callRe.FindAllStringSubmatch(string(src), -1) {
		set[m[1]] = true
	}
	return sortedKeys(set), nil
}

// HandWritten returns the NVML functions defined in csrc/*.c (except the
// generated file), and checks them against the SIMFN list in csrc/fns.h.
func HandWritten(simDir string) (map[string]bool, error) {
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

// OldDriverExcluded reads csrc/old_driver.txt.
func OldDriverExcluded(simDir string) ([]string, error) {
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

// Generate returns the content of csrc/stubs_gen.c.
func Generate(simDir string) ([]byte, error) {
	nvmlDir, err := GoNvmlDir(simDir)
	if err != nil {
		return nil, err
	}
	syms, err := NvmlSymbols(nvmlDir)
	if err != nil {
		return nil, err
	}
	hand, err := HandWritten(simDir)
	if err != nil {
		return nil, err
	}
	old, err := OldDriverExcluded(simDir)
	if err != nil {
		return nil, err
	}
	all := map[string]bool{}
	for _, s := range syms {
		all[s] = true
	}
	oldSet := map[string]bool{}
	for _, s := range old {
		if !all[s] {
			return nil, fmt.Errorf("csrc/old_driver.txt: %s is not a function go-nvml calls", s)
		}
		oldSet[s] = true
	}
	var stubs []string
	for _, s := range syms {
		if !hand[s] {
			stubs = append(stubs, s)
		}
	}

	var b bytes.Buffer
	b.WriteString("// Code generated by simnvml/gen from go-nvml's pkg/nvml/nvml.go; DO NOT EDIT.\n\n")
	b.WriteString("/*\n * Every NVML function go-nvml can call that simnvml does not model: it is\n")
	b.WriteString(" * counted and returns NVML_ERROR_NOT_SUPPORTED (3). Functions named in\n")
	b.WriteString(" * old_driver.txt are left out of the -DSIMNVML_OLD_DRIVER build.\n */\n\n")
	fmt.Fprintf(&b, "#define SIMNVML_NSTUBS %d\n\n", len(stubs))
	b.WriteString("unsigned long long simnvml_stub_calls[SIMNVML_NSTUBS + 1];\n")
	b.WriteString("const unsigned int simnvml_nstubs = SIMNVML_NSTUBS;\n")
	b.WriteString("const char *const simnvml_stub_names[SIMNVML_NSTUBS + 1] = {\n")
	for _, s := range stubs {
		fmt.Fprintf(&b, "\t%q,\n", s)
	}
	b.WriteString("\t0,\n};\n\n")
	b.WriteString("static inline int stub(unsigned int i)\n{\n")
	b.WriteString("\t__atomic_fetch_add(&simnvml_stub_calls[i], 1, __ATOMIC_RELAXED);\n")
	b.WriteString("\treturn 3; /* NVML_ERROR_NOT_SUPPORTED */\n}\n\n")
	b.WriteString("#pragma GCC visibility push(default)\n\n")
	// Every build's stubs first, then in one block those the old driver
	// lacks; the numbers index simnvml_stub_names either way.
	for _, newer := range []bool{false, true} {
		if newer {
			b.WriteString("\n/* Newer than the old driver (old_driver.txt). */\n#ifndef SIMNVML_OLD_DRIVER\n")
		}
		for i, s := range stubs {
			if oldSet[s] == newer {
				fmt.Fprintf(&b, "int %s(void) { return stub(%d); }\n", s, i)
			}
		}
	}
	b.WriteString("#endif\n\n#pragma GCC visibility pop\n")
	return b.Bytes(), nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
