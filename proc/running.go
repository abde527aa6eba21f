package proc

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
)

// maxScan bounds the processes Running looks at: a host with more stops
// the scan there (what was not found reads as not running).
const maxScan = 1 << 16

// maxArgv0 is the most of a command line Running reads: PATH_MAX, the
// longest path a daemon's unit can start it by (argv[0] is that path).
const maxArgv0 = 4096

// Running scans the /proc at root for processes running the programs
// named exes (the base name of argv[0], as a systemd unit starts a daemon)
// and returns a PID running each, the first found, or 0 where none does.
// Each process's command line is read once; a process that goes away
// meanwhile, or has none (a kernel thread), is skipped.
func Running(root string, exes ...string) []int {
	pids := make([]int, len(exes))
	d, err := os.Open(root)
	if err != nil {
		return pids
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
		exe := filepath.Base(string(argv0))
		for i := range exes {
			if pids[i] == 0 && exes[i] == exe {
				pids[i] = pid
			}
		}
	}
	return pids
}
