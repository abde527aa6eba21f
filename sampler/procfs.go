package sampler

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

// nsState says whether the PIDs NVML reports (always the host's) name the
// same processes in our /proc.
type nsState uint8

const (
	nsHost  nsState = iota // we run in the host's PID namespace
	nsOther                // a container's namespace, or unknown: never look NVML's PIDs up
)

// pidNamespace decides once whether /proc/<pid> may be trusted for NVML's
// PIDs; when it cannot tell, no: a wrong name is worse than none.
func pidNamespace(root string) nsState {
	l, err := os.Readlink(filepath.Join(root, "self", "ns", "pid"))
	if err == nil && l == initPIDNamespace {
		return nsHost
	}
	return nsOther
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

// procDesc is what describe found for a PID, and when (ProcReader.mono).
type procDesc struct {
	name, cmdline string
	trunc         bool
	workload      reading.Workload
	uid           reading.Opt[uint32]
	origin        reading.ProcOrigin
	at            int64
	gen           uint64 // the read that last listed the PID
	start         string // the process's start time (stat field 22); "" when unreadable
}

// describeAll names the listed processes, from memory unless described
// over describeRefresh ago or reused: the start time is read only where the
// PID was not in the previous read or that read is reuseGap old. PIDs no
// longer listed are forgotten. at is when the read started. The owner's
// name comes from the user name cache at every read, not from memory: a
// uid given as text while its lookup was out (the same job's processes on
// other GPUs looked up at once, a slow directory) is named once the lookup
// answers, not a minute later. It is looked up here, on the process
// reader's goroutine, never in the sample (userNames bounds the wait).
func (p *ProcReader) describeAll(list []reading.Process, at time.Time) {
	if p.descs == nil {
		p.descs = map[uint32]procDesc{}
	}
	p.descGen++
	now := p.mono()
	gap := at.Sub(p.descAt)
	recent := p.descGen > 1 && gap >= 0 && gap < reuseGap // a clock set back says nothing
	p.descAt = at
	for i := range list {
		pr := &list[i]
		d, ok := p.descs[pr.PID]
		start, seen := d.start, ok && recent && d.gen == p.descGen-1
		if !seen {
			start = p.startTime(pr.PID)
		}
		if ok && d.start == start && now-d.at < int64(describeRefresh) {
			pr.Name, pr.Cmdline, pr.CmdlineTrunc, pr.Origin, pr.Workload = d.name, d.cmdline, d.trunc, d.origin, d.workload
			pr.UID = d.uid
		} else {
			p.describe(pr)
			d = procDesc{name: pr.Name, cmdline: pr.Cmdline, trunc: pr.CmdlineTrunc, origin: pr.Origin, workload: pr.Workload,
				uid: pr.UID, at: now, start: start}
		}
		if uid, ok := pr.UID.Get(); ok {
			pr.User = p.users.Name(uid)
		}
		d.gen = p.descGen
		p.descs[pr.PID] = d
	}
	for pid, d := range p.descs {
		if d.gen != p.descGen {
			delete(p.descs, pid)
		}
	}
}

// startTime returns field 22 of /proc/<pid>/stat, the process's start time
// (with the PID, it names one process); "" when it cannot be read.
func (p *ProcReader) startTime(pid uint32) string {
	if p.ns != nsHost {
		return ""
	}
	b, err := readCapped(filepath.Join(p.cfg.ProcRoot, strconv.FormatUint(uint64(pid), 10), "stat"), 1024)
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
func (p *ProcReader) describe(pr *reading.Process) {
	if p.ns != nsHost {
		pr.Origin = reading.ProcOtherNS
		return
	}
	dir := filepath.Join(p.cfg.ProcRoot, strconv.FormatUint(uint64(pr.PID), 10))
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
	pr.Name = text(string(comm))
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
	return text(string(b)), cut
}
