package reading

import "time"

// ProcKind says how a process uses a GPU: as a compute (CUDA) context, a
// graphics context, or both. It is a bit set.
type ProcKind uint8

// Process kinds.
const (
	ProcCompute  ProcKind = 1 << iota // listed by GetComputeRunningProcesses
	ProcGraphics                      // listed by GetGraphicsRunningProcesses
)

func (k ProcKind) String() string {
	switch k {
	case ProcCompute:
		return "compute"
	case ProcGraphics:
		return "graphics"
	case ProcCompute | ProcGraphics:
		return "compute+graphics"
	}
	return "unknown"
}

// ProcOrigin says whether a process's name and command line could be read
// from /proc, and if not, why. A PID NVML reports is never matched to a
// process by guessing.
type ProcOrigin uint8

// Process origins.
const (
	ProcHere       ProcOrigin = iota // /proc/<pid> read: Name and Cmdline are set
	ProcGone                         // /proc/<pid> no longer exists: the process ended
	ProcOtherNS                      // the logger is not in the host's PID namespace: NVML's PIDs name other processes here
	ProcUnreadable                   // /proc/<pid> exists but could not be read (permissions)
)

func (o ProcOrigin) String() string {
	switch o {
	case ProcHere:
		return "here"
	case ProcGone:
		return "exited"
	case ProcOtherNS:
		return "other PID namespace"
	case ProcUnreadable:
		return "unreadable"
	}
	return "unknown"
}

// Process is one process running on a GPU, as the slow tier read it.
type Process struct {
	PID           uint32
	Kind          ProcKind
	MemBytes      Opt[uint64] // GPU memory used; absent when the driver does not say (e.g. without permission)
	SMUtil        Opt[uint32] // % of time a kernel of this process ran, over the last sampling period (GetProcessUtilization)
	MemUtil       Opt[uint32] // % of time this process read or wrote GPU memory, same period
	Origin        ProcOrigin
	Name          string      // /proc/<pid>/comm; empty unless Origin is ProcHere
	Cmdline       string      // /proc/<pid>/cmdline with NULs as spaces, trimmed to MaxCmdline bytes
	CmdlineTrunc  bool        // Cmdline was cut at MaxCmdline
	Workload      Workload    // the job it belongs to, from /proc/<pid>/cgroup; unknown unless Origin is ProcHere
	UID           Opt[uint32] // the owner: real uid from /proc/<pid>/status; absent unless Origin is ProcHere
	User          string      // UID's user name, or UID as text when it has none or the lookup did not answer; empty when UID is absent
	UtilSupported bool        // GetProcessUtilization answered for this GPU in this read
}

// MaxCmdline is the most bytes of a command line kept per process.
const MaxCmdline = 256

// ProcStatus says whether a process read holds a list.
type ProcStatus uint8

// Process read statuses. Anything but ProcOK means "no process data": the
// list is empty because it is unknown, not because the GPU is idle.
const (
	ProcOK          ProcStatus = iota // List is the GPU's processes (possibly none)
	ProcUnsupported                   // the driver refused the process list (not supported, no permission, missing)
	ProcFailed                        // the call failed; Err says how
	ProcHung                          // the call did not return by the deadline; Err names it
	ProcNotRead                       // no read has completed yet
)

func (s ProcStatus) String() string {
	switch s {
	case ProcOK:
		return "ok"
	case ProcUnsupported:
		return "not available"
	case ProcFailed:
		return "failed"
	case ProcHung:
		return "hung"
	case ProcNotRead:
		return "not read yet"
	}
	return "unknown"
}

// Procs is one read of a GPU's running processes (the slow tier, about once a
// second). It is immutable once published: readers share the pointer.
type Procs struct {
	GPU    int
	Time   time.Time // when the read began
	Status ProcStatus
	Err    string    // ProcFailed/ProcHung: what went wrong
	List   []Process // sorted by PID; only meaningful with ProcOK
	// LastOK: for a read that is not ProcOK, the most recent one that was
	// (nil when there never was one). A crash snapshot names the processes
	// from it even when the current read is hung.
	LastOK *Procs
}

// Good returns the most recent successful read: p itself when it succeeded,
// else p.LastOK; nil when there is none.
func (p *Procs) Good() *Procs {
	if p == nil {
		return nil
	}
	if p.Status == ProcOK {
		return p
	}
	return p.LastOK
}
