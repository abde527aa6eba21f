package report

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// The logger runs as root: events.log is 0600 (lumberjack's mode), crashes/
// 0750 and its snapshots 0640. A report run by another user must say which
// file it could not read and what to do, and never report "no incident"
// from files it did not read.

// opener opens a file or directory of the log directory for reading:
// os.Open, or in tests one that fails as a file the user may not read does.
type opener func(name string) (*os.File, error)

// unreadable is the error for a file of the log directory that could not
// be read. name is the file as the user knows it (events.log, crashes/,
// gpu0-5a3c1e2f-deep-2026-11-30.csv) and path where it is; a permission error says
// what would let the user read it.
func unreadable(name, path string, err error) error {
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("cannot read %s: permission denied (%s)", name, accessHint(path))
	}
	return fmt.Errorf("cannot read %s: %w", name, err)
}

// accessHint says who may read path: root, or also the members of its
// group when its mode lets the group read it (a directory: list and enter
// it).
func accessHint(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return hint(0, 0, nil)
	}
	var gid uint32
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		gid = st.Gid
	}
	return hint(fi.Mode(), gid, groupName)
}

// hint is accessHint's answer for a file of mode owned by group gid; group
// names a group id. Root's own group (gid 0) is not offered: joining it is
// not a way anyone should be told to read a log.
func hint(mode fs.FileMode, gid uint32, group func(uint32) string) string {
	need := fs.FileMode(0o040)
	if mode.IsDir() {
		need = 0o050
	}
	if mode&need == need && gid != 0 && group != nil {
		return "run as root or join group " + group(gid)
	}
	return "run as root"
}

// groupName is the name of group gid, or its number when it has none.
func groupName(gid uint32) string {
	id := strconv.FormatUint(uint64(gid), 10)
	if g, err := user.LookupGroupId(id); err == nil {
		return g.Name
	}
	return id
}
