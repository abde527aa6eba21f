package testutil

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// FakeProc builds a /proc tree: self/ns/pid, the host's PID namespace
// (the kernel's PROC_PID_INIT_INO) when host is set, another otherwise,
// and one directory per process with its comm and cmdline (procs[pid]:
// name, NUL-separated command line).
func FakeProc(t testing.TB, host bool, procs map[int][2]string) string {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "self", "ns"), 0o755); err != nil {
		t.Fatal(err)
	}
	ns := "pid:[4026532000]"
	if host {
		ns = "pid:[4026531836]"
	}
	if err := os.Symlink(ns, filepath.Join(root, "self", "ns", "pid")); err != nil {
		t.Fatal(err)
	}
	for pid, p := range procs {
		dir := filepath.Join(root, strconv.Itoa(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "comm"), []byte(p[0]+"\n"), 0o644)
		os.WriteFile(filepath.Join(dir, "cmdline"), []byte(p[1]), 0o644)
	}
	return root
}
