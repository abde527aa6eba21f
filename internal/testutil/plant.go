package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// Planted is a file outside the directory under test, standing for one of
// root's, that a link planted in that directory points at.
type Planted struct {
	Target  string // the file
	content string
}

// PlantLink puts at path a symbolic link, as a user who could write its
// directory would, to a new file holding content in a directory of its own
// (to that directory when dir is set, as a link planted at crashes/ would).
func PlantLink(t testing.TB, path, content string, dir bool) Planted {
	t.Helper()
	p := Planted{Target: filepath.Join(t.TempDir(), "precious"), content: content}
	if err := os.WriteFile(p.Target, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	to := p.Target
	if dir {
		to = filepath.Dir(p.Target)
	}
	if err := os.Symlink(to, path); err != nil {
		t.Fatal(err)
	}
	return p
}

// Check fails the test when the link's target was written, or anything was
// added beside it.
func (p Planted) Check(t testing.TB) {
	t.Helper()
	if b, err := os.ReadFile(p.Target); err != nil || string(b) != p.content {
		t.Errorf("the planted link's target %s now holds %.200q (%v), want %q", p.Target, b, err, p.content)
	}
	if names := Entries(t, filepath.Dir(p.Target)); len(names) != 1 {
		t.Errorf("the planted link's target directory holds %q", names)
	}
}
