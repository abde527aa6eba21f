package board

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/action"
)

func TestFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	const uuid = "GPU-8ca3f2a1-0000-1111-2222-333344445555"
	h, err := Read(dir, uuid)
	if err != nil || h.UUID != uuid || len(h.Boots) != 0 {
		t.Fatalf("no file: %+v, %v", h, err)
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h.Count("boot-a", "xid79", t0)
	h.Ack = &action.AckRecord{Time: t0.Add(time.Minute), Action: action.Reboot, Note: "reseated", By: "root", Classes: []string{"xid79"}}
	if err := Write(dir, h); err != nil {
		t.Fatal(err)
	}
	got, err := Read(dir, uuid)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Boots) != 1 || got.Boots[0].Classes["xid79"].Count != 1 || got.Ack == nil || got.Ack.Action != action.Reboot || got.Ack.Note != "reseated" {
		t.Errorf("read back %+v", got)
	}
}

// TestFileRefuses: a UUID that is not one, a planted symbolic link,
// another board's file and damage are errors, never followed or taken.
func TestFileRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, u := range []string{"", "../x", "GPU-1/2", "GPU 1"} {
		if _, err := Path(dir, u); err == nil {
			t.Errorf("%q taken as a UUID", u)
		}
	}
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte(`{"uuid":"GPU-a"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p, _ := Path(dir, "GPU-a")
	if err := os.Symlink(secret, p); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(dir, "GPU-a"); err == nil {
		t.Error("read through a symbolic link")
	}
	// Writing replaces the link, never the file it points to.
	if err := Write(dir, action.History{UUID: "GPU-a"}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(secret); string(b) != `{"uuid":"GPU-a"}` {
		t.Errorf("the link's target was written: %s", b)
	}
	if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("after the write: %v, %v", fi, err)
	}
	pb, _ := Path(dir, "GPU-b")
	os.WriteFile(pb, []byte(`{"uuid":"GPU-c"}`), 0o644)
	if _, err := Read(dir, "GPU-b"); err == nil {
		t.Error("took another board's state")
	}
	os.WriteFile(pb, []byte(`{"uuid":`), 0o644)
	if _, err := Read(dir, "GPU-b"); err == nil {
		t.Error("took a damaged file")
	}
}

// A state file that did not read is renamed aside, its bytes kept.
func TestSetAside(t *testing.T) {
	dir := t.TempDir()
	p, _ := Path(dir, "GPU-a")
	os.WriteFile(p, []byte(`{"uuid":`), 0o644)
	to, err := SetAside(dir, "GPU-a", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	if err != nil || to != p+".corrupt-20260102T030405.000Z" {
		t.Fatalf("%q, %v", to, err)
	}
	if b, err := os.ReadFile(to); err != nil || string(b) != `{"uuid":` {
		t.Errorf("%q, %v", b, err)
	}
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		t.Errorf("the file is still there: %v", err)
	}
	if _, err := SetAside(dir, "../x", time.Now()); err == nil {
		t.Error("set aside a path that is no UUID")
	}
}
