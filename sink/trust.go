package sink

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// The daemon runs as root and writes its files by name into the log
// directory (and the control socket's and the lock file's). Whoever else
// can write such a directory can plant a symbolic link under a name the
// daemon is about to open, and have root write into any file of the
// system. So a directory the daemon writes in must be owned by root or by
// the daemon's own user and writable by no one else (CheckDir), and the
// daemon's files in it are opened without following a link (OpenNoFollow,
// CheckNotLink): a link found there was planted before the directory was
// made safe, and is refused rather than written through.

// ErrUntrusted is matched (errors.Is) by CheckDir's errors for a
// directory, or one of its parents, that someone other than root or the
// daemon's user could write.
var ErrUntrusted = errors.New("writable by others")

// untrusted is CheckDir's error: its text says who can write what.
type untrusted string

func (e untrusted) Error() string        { return string(e) }
func (e untrusted) Is(target error) bool { return target == ErrUntrusted }

func untrustedf(format string, a ...any) error { return untrusted(fmt.Sprintf(format, a...)) }

// CheckDir checks that dir, or, when it does not exist yet, the directory it
// would be made in, can be written by root and the daemon's user only: dir
// is owned by one of them and writable neither by every user nor by a group
// other than root's or the daemon's, and each directory above it (as named
// and with every link resolved) is owned by one of them too and writable by
// no one else unless it is sticky, as /tmp is (others can neither rename
// nor remove what root owns there), or root owns it and only its group may
// write; no link on the way, as named, is owned by anyone else. A missing dir is not an error: the
// daemon makes it (with a safe mode); a file where a directory should be
// wraps syscall.ENOTDIR.
func CheckDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	// As named, a link on the way is someone's: one another user owns they
	// could replace (in their own directory, or in a sticky one, where
	// they may remove what they own) and send the daemon elsewhere. Checked
	// first: with fs.protected_symlinks, following such a link in a sticky
	// directory fails with a less telling "permission denied".
	for d := abs; ; d = filepath.Dir(d) {
		if err := checkLinkOwner(d); err != nil {
			return err
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	// The nearest existing directory: dir itself, or where it will be made
	// (which then only needs to be safe as a parent).
	p, parent := abs, false
	for {
		fi, err := os.Stat(p)
		if err == nil {
			if !fi.IsDir() {
				return syscall.ENOTDIR
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || p == filepath.Dir(p) {
			return unwrapPath(err)
		}
		p, parent = filepath.Dir(p), true
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return unwrapPath(err)
	}
	if err := checkOne(p, parent); err != nil {
		return err
	}
	for _, q := range []string{p, real} {
		for d := q; d != filepath.Dir(d); {
			d = filepath.Dir(d)
			if err := checkOne(d, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkLinkOwner refuses path when it is a symbolic link owned by someone
// other than root or the daemon's user.
func checkLinkOwner(path string) error {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		return nil // not a link (checkOne says what else is wrong with it)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return untrustedf("%s is a link owned by uid %d, not by root or the daemon's user", path, st.Uid)
	}
	return nil
}

// checkOne checks the directory at path (links followed): owned by root or
// the daemon's user, and writable by no one else; a parent may be writable
// by everyone when it is sticky, and by its group when root owns it.
func checkOne(path string, parent bool) error {
	fi, err := os.Stat(path)
	if err != nil {
		return unwrapPath(err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil // not Linux: nothing to tell owners by
	}
	if st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return untrustedf("%s is owned by uid %d, not by root or the daemon's user", path, st.Uid)
	}
	mode := fi.Mode()
	if parent && mode&os.ModeSticky != 0 {
		return nil
	}
	if mode&0o002 != 0 {
		return untrustedf("%s is writable by every user (mode %04o)", path, mode.Perm()|stickyBit(mode))
	}
	// A root-owned parent that an administrator gave a group write on is
	// an administrator's choice: Ubuntu's /var/log is root:syslog 0775, and
	// the unit's log dir is under it. The directory itself is held to it.
	if mode&0o020 != 0 && st.Gid != 0 && int(st.Gid) != os.Getegid() && !(parent && st.Uid == 0) {
		return untrustedf("%s is writable by group %d (mode %04o)", path, st.Gid, mode.Perm())
	}
	return nil
}

func stickyBit(mode os.FileMode) os.FileMode {
	if mode&os.ModeSticky != 0 {
		return 0o1000
	}
	return 0
}

// unwrapPath drops the *PathError's operation and path when the caller's
// message names the path already.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// OpenNoFollow opens path as os.OpenFile does but refuses a symbolic link
// as its last element (ELOOP): the daemon's own files are opened this way.
func OpenNoFollow(path string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(path, flag|syscall.O_NOFOLLOW, perm)
}

// CheckNotLink checks that path is absent or a regular file (a directory
// when dir is set), not a symbolic link or anything else: for the names
// that are written by name through code that follows links (lumberjack, a
// lock library) and the directories snapshots are written in.
func CheckNotLink(path string, dir bool) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link: the daemon never writes through one", path)
	case dir && !fi.IsDir():
		return fmt.Errorf("%s is not a directory", path)
	case !dir && !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file", path)
	}
	return nil
}
