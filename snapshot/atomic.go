package snapshot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

const (
	// fileMode: snapshots hold kernel log lines, which many distributions
	// keep from unprivileged users (kernel.dmesg_restrict), so not world-readable.
	fileMode = 0o640
	dirMode  = 0o750
	// maxNameTries bounds the -2, -3 ... suffixes tried for one name. Names
	// carry the millisecond and the GPU, and cooldowns allow one snapshot per
	// GPU per minute, so more than a couple means something is wrong.
	maxNameTries = 1000
)

// fileOps are the two file system calls tests replace to inject failures
// that permissions cannot provoke (the daemon, and often the tests, run as root).
type fileOps struct {
	write func(f *os.File, p []byte) (int, error)
	link  func(oldname, newname string) error
}

// defaultOps are the real calls.
func defaultOps() fileOps {
	return fileOps{write: (*os.File).Write, link: os.Link}
}

// writeTemp writes data to a new hidden temp file in dir (so that a glob for
// "crash-*.log" never sees it), fsyncs and closes it, and returns its path.
// On any error the temp file is removed.
func (o fileOps) writeTemp(dir, name string, data []byte) (string, error) {
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
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
	if _, err := o.write(f, data); err != nil {
		return "", fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Chmod(fileMode); err != nil {
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

// createNew writes data to dir/base+ext, or base-2+ext, base-3+ext ... if
// that name is taken, without ever replacing an existing file: the name is
// claimed with link(2), which fails if the target exists, so two writers in
// the same millisecond cannot both take one name. It returns the path
// written. A non-empty path with an error means the file is in place but the
// directory could not be fsynced.
func (o fileOps) createNew(dir, base, ext string, data []byte) (string, error) {
	if err := ensureDir(dir); err != nil {
		return "", err
	}
	tmp, err := o.writeTemp(dir, base+ext, data)
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
		err := o.link(tmp, path)
		if err != nil && linkUnsupported(err) {
			err = reserveAndRename(tmp, path)
		}
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("create %s: %w", path, err)
		}
		if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return path, fmt.Errorf("remove temp file %s: %w", tmp, err)
		}
		return path, syncDir(dir)
	}
	return "", fmt.Errorf("create %s%s in %s: %d names taken", base, ext, dir, maxNameTries)
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
func reserveAndRename(tmp, path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fileMode)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// replace atomically replaces path with data: a reader sees the old file or
// the new one, never a mix.
func (o fileOps) replace(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := o.writeTemp(dir, filepath.Base(path), data)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return syncDir(dir)
}

// syncDir fsyncs a directory so that a new or renamed entry survives a
// power loss or a kernel panic, which is what follows some GPU crashes.
func syncDir(dir string) error {
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

// ensureDir creates dir (and its parents) if needed, making a new entry durable.
func ensureDir(dir string) error {
	err := os.Mkdir(dir, dirMode)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(dir), dirMode); err != nil {
			return fmt.Errorf("create %s: %w", filepath.Dir(dir), err)
		}
		err = os.Mkdir(dir, dirMode)
	}
	switch {
	case err == nil:
		return syncDir(filepath.Dir(dir))
	case errors.Is(err, fs.ErrExist):
		return nil
	default:
		return fmt.Errorf("create %s: %w", dir, err)
	}
}
