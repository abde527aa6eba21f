package proc

import (
	"bytes"
	"iter"
	"os"
	"path/filepath"
	"strconv"
)

// maxScan bounds the processes Programs looks at: a host with more stops
// the scan there (what was not found reads as not running).
const maxScan = 1 << 16

// maxArgv0 is the most of a command line Programs reads: PATH_MAX, the
// longest path a daemon's unit can start it by (argv[0] is that path).
const maxArgv0 = 4096

// Programs scans the /proc at root and yields each process's PID and the
// program it runs: the base name of argv[0], as a systemd unit starts a
// daemon. Each process's command line is read once; a process that goes
// away meanwhile, or has none (a kernel thread), is skipped.
func Programs(root string) iter.Seq2[int, string] {
	return func(yield func(int, string) bool) {
		d, err := os.Open(root)
		if err != nil {
			return
		}
		defer d.Close()
		names, _ := d.Readdirnames(maxScan)
		for _, n := range names {
			pid, err := strconv.Atoi(n)
			if err != nil || pid <= 0 {
				continue
			}
			b, err := readCapped(filepath.Join(root, n, "cmdline"), maxArgv0)
			if err != nil || len(b) == 0 {
				continue
			}
			argv0, _, _ := bytes.Cut(b, []byte{0})
			if !yield(pid, filepath.Base(string(argv0))) {
				return
			}
		}
	}
}
