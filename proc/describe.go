// Package proc knows what /proc says of a process: its command, its owner,
// its start time and the workload its cgroup names (a Slurm job and step,
// a Kubernetes pod, a container, a systemd unit). It never calls NVML: the
// sampler lists a GPU's processes by PID and asks a Describer to fill in
// the rest. It also says which programs run (Programs), for the fabric's
// daemons (FabricServices).
package proc

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// initPIDNamespace is the inode of the host's (initial) PID namespace, fixed
// by the kernel (PROC_PID_INIT_INO).
const initPIDNamespace = "pid:[4026531836]"

// hostPIDNamespace reports whether the PIDs NVML reports (always the
// host's) name the same processes in the /proc at root: whether we run in
// the host's PID namespace. When it cannot tell, no: a wrong name is worse
// than none.
func hostPIDNamespace(root string) bool {
	l, err := os.Readlink(filepath.Join(root, "self", "ns", "pid"))
	return err == nil && l == initPIDNamespace
}

// describeRefresh is how long a listed process's name and command line are
// kept before /proc is read again (reading them every second cost a fifth
// of the logger's CPU at 8 GPUs), for a PID and its start time, so a reused
// PID is read afresh. A process renaming itself shows within this time.
const describeRefresh = time.Minute

// reuseGap is how far apart two reads listing a PID must be before it may
// have been reused in between, and its start time is read again (about
// 24 us): within a second, the process would have to exit and the kernel
// hand out the same PID.
const reuseGap = 2 * time.Second

// Describer describes the processes one GPU's process reader lists, from
// the /proc at its root, keeping what it read for the next read. Not safe
// for concurrent use: each reader has its own.
type Describer struct {
	root  string
	host  bool       // root is in the host's PID namespace (hostPIDNamespace), decided once
	users *userNames // owner.go: the daemon's one cache (processUsers)
	descs map[uint32]procDesc
	gen   uint64    // the reads made
	at    time.Time // when read gen started
}

// procDesc is what describe found for a PID, and when.
type procDesc struct {
	name, cmdline string
	trunc         bool
	workload      reading.Workload
	uid           reading.Opt[uint32]
	origin        reading.ProcOrigin
	at            time.Time // read (monotonic)
	gen           uint64    // the read that last listed the PID
	start         string    // the process's start time (stat field 22); "" when unreadable
}

// NewDescriber returns a Describer of the processes in the /proc at root
// ("/proc"; tests give a fake one).
func NewDescriber(root string) *Describer {
	return &Describer{root: root, host: hostPIDNamespace(root), users: processUsers, descs: map[uint32]procDesc{}}
}

// Describe fills each listed process's Origin and, where /proc has it, its
// Name, Cmdline, Workload, UID and User. at is when the read started.
//
// A process is described from memory unless described over describeRefresh
// ago or reused: the start time is read only where the PID was not in the
// previous read or that read is reuseGap old. PIDs no longer listed are
// forgotten. The owner's name comes from the user name cache at every read,
// not from memory: a uid given as text while its lookup was out (the same
// job's processes on other GPUs looked up at once, a slow directory) is
// named once the lookup answers, not a minute later. It is looked up here,
// on the process reader's goroutine, never in the sample (userNames bounds
// the wait).
func (d *Describer) Describe(list []reading.Process, at time.Time) {
	d.gen++
	now := time.Now()
	gap := at.Sub(d.at)
	recent := d.gen > 1 && gap >= 0 && gap < reuseGap // a clock set back says nothing
	d.at = at
	for i := range list {
		pr := &list[i]
		e, ok := d.descs[pr.PID]
		start, seen := e.start, ok && recent && e.gen == d.gen-1
		if !seen {
			start = d.startTime(pr.PID)
		}
		if ok && e.start == start && now.Sub(e.at) < describeRefresh {
			pr.Name, pr.Cmdline, pr.CmdlineTrunc, pr.Origin, pr.Workload = e.name, e.cmdline, e.trunc, e.origin, e.workload
			pr.UID = e.uid
		} else {
			d.describe(pr)
			e = procDesc{name: pr.Name, cmdline: pr.Cmdline, trunc: pr.CmdlineTrunc, origin: pr.Origin, workload: pr.Workload,
				uid: pr.UID, at: now, start: start}
		}
		if uid, ok := pr.UID.Get(); ok {
			pr.User = d.users.Name(uid)
		}
		e.gen = d.gen
		d.descs[pr.PID] = e
	}
	for pid, e := range d.descs {
		if e.gen != d.gen {
			delete(d.descs, pid)
		}
	}
}

// startTime returns field 22 of /proc/<pid>/stat, the process's start time
// (with the PID, it names one process); "" when it cannot be read.
func (d *Describer) startTime(pid uint32) string {
	if !d.host {
		return ""
	}
	b, err := readCapped(filepath.Join(d.root, strconv.FormatUint(uint64(pid), 10), "stat"), 1024)
	if err != nil {
		return ""
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses,
	// so count fields from the last ')': state is field 3, starttime 22.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return ""
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 22-2 {
		return ""
	}
	return string(f[22-3])
}

// describe fills a process's name, command line, owner's uid and job from
// /proc, or says why it cannot.
func (d *Describer) describe(pr *reading.Process) {
	if !d.host {
		pr.Origin = reading.ProcOtherNS
		return
	}
	dir := filepath.Join(d.root, strconv.FormatUint(uint64(pr.PID), 10))
	comm, err := os.ReadFile(filepath.Join(dir, "comm"))
	if err != nil {
		pr.Origin = originOf(err)
		return
	}
	cmd, err := readCapped(filepath.Join(dir, "cmdline"), reading.MaxCmdline+1)
	if err != nil {
		pr.Origin = originOf(err)
		return
	}
	pr.Origin = reading.ProcHere
	pr.Name = reading.Text(string(comm))
	pr.Cmdline, pr.CmdlineTrunc = cmdline(cmd)
	// Best effort: a process that exits in between has no owner or workload.
	if uid, ok := procOwner(dir).Get(); ok {
		pr.UID = reading.Some(uid)
	}
	if cg, err := readCapped(filepath.Join(dir, "cgroup"), maxCgroupFile); err == nil {
		pr.Workload = parseCgroup(cg)
	}
}

// maxCgroupFile is the most of /proc/<pid>/cgroup read: a v1 host lists a
// dozen hierarchies of a few hundred bytes each.
const maxCgroupFile = 8 << 10

func originOf(err error) reading.ProcOrigin {
	// ESRCH: it exited while we read it.
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return reading.ProcGone
	}
	return reading.ProcUnreadable
}

// readCapped reads at most n bytes of a file; a read that fails midway
// gives what it read.
func readCapped(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, int64(n)))
	return b, nil
}

// cmdline turns /proc/<pid>/cmdline (NUL-separated) into one line of at most
// reading.MaxCmdline bytes, and reports whether it was cut. Control
// characters become spaces so the line cannot break a snapshot or a reply.
func cmdline(raw []byte) (string, bool) {
	raw = bytes.TrimRight(raw, "\x00")
	cut := len(raw) > reading.MaxCmdline
	if cut {
		raw = raw[:reading.MaxCmdline]
	}
	b := make([]byte, len(raw))
	for i, c := range raw {
		if c < 0x20 || c == 0x7f {
			c = ' '
		}
		b[i] = c
	}
	return reading.Text(string(b)), cut
}
