package testutil

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// SmallDisk mounts a tmpfs of size (a mount option: "64k", "2m") at a new
// directory, unmounted when the test ends. A host that cannot mount (not
// root) skips the test, except under CI=true: CI runs as root and must.
// Its root is 0755, not tmpfs's 1777: the logger refuses a log dir every
// user can write.
func SmallDisk(t testing.TB, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0755", "tmpfs", dir).CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("cannot mount a small tmpfs (%v: %s); CI runs as root and must", err, out)
		}
		t.Skipf("cannot mount a small tmpfs here (%v: %s); the sink tests cover ENOSPC with an injected writer", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// FillDisk writes path until its file system is full (ENOSPC).
func FillDisk(t testing.TB, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}
