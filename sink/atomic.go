package sink

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// maxNameTries bounds the -2, -3 ... suffixes CreateNew tries for one name.
// Snapshot names carry the millisecond and the GPU, and cooldowns allow one
// snapshot per GPU per minute, so more than a couple means something is wrong.
const maxNameTries = 1000

// FileOps are the file system calls of an atomic write. Nil fields are the
// real calls; tests replace them to inject failures that permissions cannot
// provoke (the daemon, and often the tests, run as root).
type FileOps struct {
	Write   func(f *os.File, p []byte) (int, error) // default (*os.File).Write
	Link    func(oldname, newname string) error     // default os.Link
	SyncDir func(dir string) error                  // default SyncDir
}

func (o FileOps) write(f *os.File, p []byte) (int, error) {
	if o.Write != nil {
		return o.Write(f, p)
	}
	return f.Write(p)
}

func (o FileOps) link(oldname, newname string) error {
	if o.Link != nil {
		return o.Link(oldname, newname)
	}
	return os.Link(oldname, newname)
}

func (o FileOps) syncDir(dir string) error {
	if o.SyncDir != nil {
		return o.SyncDir(dir)
	}
	return SyncDir(dir)
}

// Atomic writes whole files so that a crash leaves the old file or the new
// one (or none), never a part: a hidden temp file in the same directory is
// written, fsynced and closed, then renamed or linked into place, and the
// directory fsynced. The temp file is removed on any error. It is the one
// way the daemon writes a whole file (system-info.txt, compressed days,
// snapshots).
type Atomic struct {
	Perm os.FileMode // the file's mode
	Ops  FileOps
}

// WriteFileAtomic replaces path with data (see Atomic.Replace).
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	return Atomic{Perm: perm}.Replace(path, data)
}

// opsWriter writes to f through FileOps.
type opsWriter struct {
	f   *os.File
	ops FileOps
}

func (w opsWriter) Write(p []byte) (int, error) { return w.ops.write(w.f, p) }

// tempMark sits between the final name and the random suffix in the name
// of writeTemp's temp files: ".<name>.tmp-<digits>".
const tempMark = ".tmp-"

// RemoveTemps removes from dir the temp files of writeTemp that a write of
// a file whose name ours accepts left behind: a write cut by a crash, or
// abandoned on a stalled disk. Hidden, nothing else would ever remove
// them; the caller makes sure no such write of its own is under way. Only
// regular files go: writeTemp makes nothing else, so a link of such a name
// (never followed) or a directory is not the daemon's and stays, with its
// target. One left is litter, not lost data: errors are not returned.
func RemoveTemps(dir string, ours func(name string) bool) {
	entries, err := os.ReadDir(dir) // lstat's types: a link is not regular
	if err != nil {
		return
	}
	for _, e := range entries {
		n := e.Name()
		i := strings.LastIndex(n, tempMark)
		if i > 1 && n[0] == '.' && e.Type().IsRegular() && ours(n[1:i]) {
			_ = os.Remove(filepath.Join(dir, n))
		}
	}
}

// writeTemp writes a new hidden temp file in dir (so that a glob for the
// final names never sees it) with what fill writes, fsyncs and closes it,
// and returns its path. On any error the temp file is removed.
func (a Atomic) writeTemp(dir, name string, fill func(io.Writer) error) (string, error) {
	f, err := os.CreateTemp(dir, "."+name+tempMark+"*")
	if err != nil {
		return "", fmt.Errorf("create temp file for %s: %w", name, err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			_ = f.Close() // may already be closed; the error is the one returned below
			_ = os.Remove(tmp)
		}
	}()
	if err := fill(opsWriter{f, a.Ops}); err != nil {
		return "", fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Chmod(a.Perm); err != nil {
		return "", fmt.Errorf("chmod %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("close %s: %w", tmp, err)
	}
	ok = true
	return tmp, nil
}

// bytesFill writes data whole.
func bytesFill(data []byte) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}
}

// Replace atomically replaces path with data: a reader sees the old file or
// the new one, never a mix. An error from fsyncing the directory is returned
// (the new file is in place then, but may not survive a power loss).
func (a Atomic) Replace(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := a.writeTemp(dir, filepath.Base(path), bytesFill(data))
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return a.Ops.syncDir(dir)
}

// CreateFrom writes path with what fill writes, never replacing an existing
// file: when path exists the error wraps fs.ErrExist and nothing changes.
// fill may stop early by returning an error. A directory fsync error is
// returned with the file in place.
func (a Atomic) CreateFrom(path string, fill func(io.Writer) error) error {
	dir := filepath.Dir(path)
	tmp, err := a.writeTemp(dir, filepath.Base(path), fill)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := a.claim(tmp, path); err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	return a.Ops.syncDir(dir)
}

// CreateNew writes data to dir/base+ext, or base-2+ext, base-3+ext ... if
// that name is taken, without ever replacing an existing file: the name is
// claimed with link(2), which fails if the target exists, so two writers in
// the same millisecond cannot both take one name. It returns the path
// written. A non-empty path with an error means the file is in place but the
// directory could not be fsynced.
func (a Atomic) CreateNew(dir, base, ext string, data []byte) (string, error) {
	tmp, err := a.writeTemp(dir, base+ext, bytesFill(data))
	if err != nil {
		return "", err
	}
	// After a successful link the data has a second name; after a failure the
	// temp file must go. Either way it is removed.
	defer os.Remove(tmp)
	for i := 1; i <= maxNameTries; i++ {
		name := base + ext
		if i > 1 {
			name = base + "-" + strconv.Itoa(i) + ext
		}
		path := filepath.Join(dir, name)
		err := a.claim(tmp, path)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("create %s: %w", path, err)
		}
		if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return path, fmt.Errorf("remove temp file %s: %w", tmp, err)
		}
		return path, a.Ops.syncDir(dir)
	}
	return "", fmt.Errorf("create %s%s in %s: %d names taken", base, ext, dir, maxNameTries)
}

// claim gives the complete temp file the name path unless path exists
// (fs.ErrExist then).
func (a Atomic) claim(tmp, path string) error {
	err := a.Ops.link(tmp, path)
	if err != nil && linkUnsupported(err) {
		err = a.reserveAndRename(tmp, path)
	}
	return err
}

// linkUnsupported reports whether link(2) failed because the file system
// has no hard links (EPERM is what vfat and some FUSE file systems return).
func linkUnsupported(err error) bool {
	return errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOTSUP) ||
		errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS)
}

// reserveAndRename is the fallback where hard links are not supported: claim
// the name with O_EXCL, then rename the temp file over the empty placeholder.
// A reader may see the empty file for that moment, never a partial one.
func (a Atomic) reserveAndRename(tmp, path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, a.Perm)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// SyncDir fsyncs a directory so that a new or renamed entry survives a
// power loss or a kernel panic, which is what follows some GPU crashes.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}
