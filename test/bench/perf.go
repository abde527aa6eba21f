package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// perfShare is one class of the logger's CPU in a perf profile.
type perfShare int

const (
	shareFsync   perfShare = iota // the fdatasync thread (gt-fsync), all of it
	shareWrite                    // the rows' write(2): the system call under sink.(*CSV).Write, kernel and Go's wrapper (os.File.Write down)
	shareWakeups                  // the kernel's side of the Go runtime sleeping and waking: epoll_pwait, futex, nanosleep (any Go program pays these)
	shareKernel                   // other kernel time: other system calls, interrupts, page faults
	shareDriver                   // the simulated driver (user space)
	shareRuntime                  // the Go runtime and cgo in user space (scheduler, sysmon, allocator)
	shareOurs                     // the logger's own Go and C code in user space
	numShares
)

// perfShares names the classes, in perfShare order.
var perfShares = [numShares]string{
	shareFsync:   "fdatasync thread",
	shareWrite:   "the rows' write(2) (kernel and Go's system call wrapper)",
	shareWakeups: "Go runtime sleeping and waking (kernel: epoll_pwait, futex, nanosleep)",
	shareKernel:  "other kernel (other system calls, interrupts, faults)",
	shareDriver:  "simulated driver",
	shareRuntime: "Go runtime and cgo (user)",
	shareOurs:    "the logger's Go and C code (user)",
}

// profile is a perf profile of the logger, its samples counted per class.
type profile struct {
	n      [numShares]int
	total  int
	period time.Duration // CPU time one sample stands for
}

// frac returns the fraction of the samples in class s.
func (p *profile) frac(s perfShare) float64 {
	if p == nil || p.total == 0 {
		return 0
	}
	return float64(p.n[s]) / float64(p.total)
}

// perfHz is the sampling rate of the profiles: a sample every 250 us of CPU.
const perfHz = 4000

// perfRecord starts `perf record` on pid for d (cpu-clock, call graphs by
// frame pointer, which Go keeps) writing into dir; wait returns the parsed
// profile, or nil with the reason when perf is missing or refused.
func perfRecord(pid int, d time.Duration, dir string) (wait func() (*profile, error)) {
	perf, err := exec.LookPath("perf")
	if err != nil {
		return func() (*profile, error) { return nil, fmt.Errorf("perf is not installed") }
	}
	data := filepath.Join(dir, "perf.data")
	rec := exec.Command(perf, "record", "-q", "-e", "cpu-clock", "-F", fmt.Sprint(perfHz), "-g",
		"-p", fmt.Sprint(pid), "-o", data, "--", "sleep", fmt.Sprintf("%.3f", d.Seconds()))
	var msg strings.Builder
	rec.Stdout, rec.Stderr = io.Discard, &msg
	if err := rec.Start(); err != nil {
		return func() (*profile, error) { return nil, err }
	}
	return func() (*profile, error) {
		if err := rec.Wait(); err != nil {
			return nil, fmt.Errorf("perf record: %v: %s", err, strings.TrimSpace(msg.String()))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		sc := exec.CommandContext(ctx, perf, "script", "-i", data, "-F", "comm,tid,ip,sym")
		sc.Stderr = io.Discard
		out, err := sc.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := sc.Start(); err != nil {
			return nil, err
		}
		p, perr := parsePerfScript(out)
		if err := sc.Wait(); err != nil {
			return nil, fmt.Errorf("perf script: %v", err)
		}
		if perr != nil {
			return nil, perr
		}
		if p.total == 0 {
			return nil, fmt.Errorf("perf recorded no samples")
		}
		p.period = time.Second / perfHz
		return p, nil
	}
}

// parsePerfScript counts the samples of `perf script -F comm,tid,ip,sym`
// output per class: a sample is a "comm tid" line followed by its stack,
// leaf first, one "address symbol" line per frame, and an empty line.
func parsePerfScript(r io.Reader) (*profile, error) {
	p := &profile{}
	var comm string
	var frames []string // symbols, leaf first
	kernelLeaf := false
	flush := func() {
		if comm == "" {
			return
		}
		p.n[classify(comm, frames, kernelLeaf)]++
		p.total++
		comm, frames = "", frames[:0]
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.TrimSpace(l) == "":
			flush()
		case l[0] != ' ' && l[0] != '\t':
			flush()
			comm = strings.Fields(l)[0]
		default:
			f := strings.Fields(l)
			if len(f) < 2 {
				continue
			}
			if len(frames) == 0 {
				kernelLeaf = len(f[0]) == 16 && strings.HasPrefix(f[0], "ffff")
			}
			frames = append(frames, f[1])
		}
	}
	flush()
	return p, sc.Err()
}

// syscallStubs are the user-space frames a system call returns to. On a VM
// the sampling interrupt that fell due inside the kernel is often taken
// only when the kernel enables interrupts again or returns to user space, so
// such a sample's leaf is the stub: it is counted with the kernel's side.
var syscallStubs = []string{"internal/runtime/syscall/linux.Syscall6", "runtime.futex", "runtime.usleep", "syscall.RawSyscall6"}

// classify puts one sample in its class.
func classify(comm string, frames []string, kernelLeaf bool) perfShare {
	if comm == fsyncThread {
		return shareFsync
	}
	has := func(sub ...string) bool {
		for _, f := range frames {
			for _, s := range sub {
				if strings.Contains(f, s) {
					return true
				}
			}
		}
		return false
	}
	leaf := ""
	if len(frames) > 0 {
		leaf = frames[0]
	}
	if has("sink.(*CSV).Write") && has("os.(*File).Write") {
		return shareWrite
	}
	for _, s := range syscallStubs {
		kernelLeaf = kernelLeaf || strings.HasPrefix(leaf, s)
	}
	if kernelLeaf {
		switch {
		case has("runtime.netpoll", "runtime.futex", "runtime.usleep", "runtime.nanosleep"):
			return shareWakeups
		}
		return shareKernel
	}
	switch {
	case strings.HasPrefix(leaf, "sim_") || strings.HasPrefix(leaf, "nvml"):
		return shareDriver
	case strings.HasPrefix(leaf, "runtime.") || strings.HasPrefix(leaf, "internal/runtime") || strings.HasPrefix(leaf, "_cgo") || strings.HasPrefix(leaf, "x_cgo"):
		return shareRuntime
	}
	return shareOurs
}
