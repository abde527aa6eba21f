package snapshot

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// Paths under Config.HostRoot of the files NVIDIA asks for in a bug report
// (nvidia-bug-report.sh), read into a crash snapshot (Manager.jobs).
const (
	pciDevicesDir   = "sys/bus/pci/devices"
	nvidiaProcDir   = "proc/driver/nvidia"
	nvidiaParamsDir = "sys/module/nvidia/parameters"
	procModules     = "proc/modules" // read instead of running lsmod, which only formats it
)

// maxFileRead bounds a /proc or /sys file read into a snapshot.
const maxFileRead = 64 << 10

// readSmall reads at most maxFileRead bytes from the start of path.
func readSmall(path string) ([]byte, error) {
	return sink.ReadBounded(os.Open, path, maxFileRead, false)
}

// fileErr says why a file could not be read, short.
func fileErr(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "missing"
	case errors.Is(err, fs.ErrPermission):
		return "no permission"
	}
	return err.Error()
}

// aerCounterFiles are the sysfs AER statistics of a PCIe device.
var aerCounterFiles = []string{"aer_dev_correctable", "aer_dev_nonfatal", "aer_dev_fatal"}

func (m *Manager) hostPath(rel ...string) string {
	return filepath.Join(append([]string{m.cfg.HostRoot}, rel...)...)
}

// powerState reads the GPU's runtime power management state from sysfs,
// before any command touches the device: reading config space (lspci) wakes
// a suspended GPU, and then the state that was is lost.
func (m *Manager) powerState(busID string) Section {
	var b strings.Builder
	if a, err := reading.ParsePCIAddr(busID); err != nil {
		b.WriteString("(not read: " + err.Error() + ")\n")
	} else {
		readEach(&b, m.hostPath(pciDevicesDir, a.String(), "power"), []string{"runtime_status", "control"}, strings.TrimSpace)
	}
	return Section{"GPU runtime power state (read first, before anything could wake the GPU)", b.String()}
}

// readEach writes "name: value" for each file of dir named, value as show
// renders the file, or "name: (why)" when it cannot be read.
func readEach(b *strings.Builder, dir string, names []string, show func(string) string) {
	for _, n := range names {
		if v, err := readSmall(filepath.Join(dir, n)); err != nil {
			fmt.Fprintf(b, "%s: (%s)\n", n, fileErr(err))
		} else {
			fmt.Fprintf(b, "%s: %s\n", n, show(string(v)))
		}
	}
}

// errReadStuck is a driver file not read because an earlier read of it has
// not come back yet.
var errReadStuck = errors.New("not read: an earlier read of this file is still stuck in the kernel")

// readFile is a diagnostic that reads one small file under HostRoot
// through the Manager's driverReads, saying a failure short (fileErr).
func (m *Manager) readFile(rel ...string) func(context.Context) ([]byte, error) {
	path := m.hostPath(rel...)
	return func(ctx context.Context) ([]byte, error) {
		return m.reads.read(ctx, path, func() ([]byte, error) {
			b, err := readSmall(path)
			if err != nil {
				return nil, errors.New(fileErr(err))
			}
			return b, nil
		})
	}
}

// driverReads reads driver files for every snapshot of a Manager. A
// driver's file can block its reader for good (/proc/driver/nvidia/gpus/<bus
// id>/information on a wedged GPU), so each read runs on its own goroutine
// and is waited for only until the caller's ctx is done (the command
// timeout), as ExecRunner waits for a program. At most one read of a file is
// in flight: a concurrent snapshot (another GPU's crash reads the same
// version file) waits for it rather than starting another. One a caller gave
// up on is left behind, and until it comes back that file is not read again
// (errReadStuck, said in the snapshot): a wedged GPU costs one blocked
// thread per file, however many snapshots ask.
type driverReads struct {
	mu       sync.Mutex
	inFlight map[string]*driverRead // by path, until the read comes back
}

// driverRead is one read in flight.
type driverRead struct {
	done      chan struct{} // closed when b and err are set
	b         []byte
	err       error
	abandoned bool // a caller gave up waiting for it (under driverReads.mu)
}

// read returns what read, the read of path, returned, waiting at most until
// ctx is done; a read of path in flight already is waited for instead.
func (g *driverReads) read(ctx context.Context, path string, read func() ([]byte, error)) ([]byte, error) {
	g.mu.Lock()
	r := g.inFlight[path]
	switch {
	case r == nil:
		r = &driverRead{done: make(chan struct{})}
		if g.inFlight == nil {
			g.inFlight = make(map[string]*driverRead)
		}
		g.inFlight[path] = r
		go func() {
			r.b, r.err = read()
			g.mu.Lock()
			delete(g.inFlight, path)
			g.mu.Unlock()
			close(r.done)
		}()
	case r.abandoned:
		g.mu.Unlock()
		return nil, errReadStuck
	}
	g.mu.Unlock()
	select {
	case <-r.done:
		return r.b, r.err
	case <-ctx.Done():
	}
	g.mu.Lock()
	r.abandoned = true
	g.mu.Unlock()
	return nil, fmt.Errorf("read abandoned: %w", ctx.Err())
}

// aerCounters renders the sysfs AER counters of the GPU at a and of the
// bridge right above it (the last of path, read with error err): the port
// that reports the GPU's link errors.
func (m *Manager) aerCounters(a reading.PCIAddr, path []reading.PCIAddr, err error) []byte {
	var b strings.Builder
	devs := []struct{ what, addr string }{{"GPU", a.String()}}
	switch {
	case err != nil:
		fmt.Fprintf(&b, "(upstream bridge not found: %s)\n", fileErr(err))
	case len(path) == 0:
		b.WriteString("(no bridge above the GPU)\n")
	default:
		devs = append(devs, struct{ what, addr string }{"upstream bridge", path[len(path)-1].String()})
	}
	for _, d := range devs {
		fmt.Fprintf(&b, "--- %s %s\n", d.what, d.addr)
		// One counter per line ("RxErr 0"): the non-zero ones and the
		// total keep the section short.
		readEach(&b, m.hostPath(pciDevicesDir, d.addr), aerCounterFiles, func(v string) string {
			var nonzero []string
			for _, l := range strings.Split(strings.TrimSpace(v), "\n") {
				if fs := strings.Fields(l); len(fs) == 2 && (fs[1] != "0" || strings.HasPrefix(fs[0], "TOTAL_")) {
					nonzero = append(nonzero, fs[0]+"="+fs[1])
				}
			}
			return strings.Join(nonzero, " ")
		})
	}
	return []byte(b.String())
}

// moduleParams renders /sys/module/nvidia/parameters as "name: value" lines.
func (m *Manager) moduleParams(context.Context) ([]byte, error) {
	dir := m.hostPath(nvidiaParamsDir)
	ents, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return nil, errors.New(fileErr(err))
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	var b strings.Builder
	readEach(&b, dir, names, strings.TrimSpace)
	return []byte(b.String()), nil
}

// Line counts of gpu-telemetry-deep.py's diagnostics, which piped dmesg
// through tail -N (and kept the last 50 CSV lines); we keep its counts.
const (
	gpuLogLines  = 100
	dmesgLines   = 200
	aerLogLines  = 20
	lastRowsKept = 50
)

// kernelLogJob runs dmesg, its lines placed on the wall clock, its GPU and
// AER sections the lines f keeps; when the kernel log is restricted
// (kernel.dmesg_restrict=1 without CAP_SYSLOG), it takes this boot's kernel
// lines from the journal instead, and says so.
func (m *Manager) kernelLogJob(f kernelFilter) job {
	return job{sections: []diagSection{
		{"dmesg (nvidia/gpu errors)", f.GPULine, gpuLogLines, true},
		{"dmesg (last 200 lines)", nil, dmesgLines, false},
		{"PCIe AER errors", f.AERLine, aerLogLines, true},
	}, run: func(ctx context.Context) ([]byte, error) {
		out, err := m.cfg.Runner.Run(ctx, "dmesg")
		if err != nil && ctx.Err() == nil {
			if jout, jerr := kernelJournal(ctx, m.cfg.Runner, "0"); jerr != nil {
				err = fmt.Errorf("%w (and journalctl -k -b 0 instead: %v)", err, jerr)
			} else {
				why, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n") // its first line says why
				out, err = append([]byte("(dmesg failed: "+cmp.Or(why, err.Error())+"; this boot's kernel lines are from journalctl -k -b 0)\n"), jout...), nil
			}
		}
		return placeKernelLines(out, m.cfg.KernelWall), err
	}}
}

// kernelJournal runs journalctl for the kernel lines of boot ("0" this one,
// "-1" the one before), in dmesg's form, with extra arguments.
func kernelJournal(ctx context.Context, r Runner, boot string, extra ...string) ([]byte, error) {
	return r.Run(ctx, "journalctl", append([]string{"-k", "-b", boot, "--no-pager", "-o", "short-monotonic"}, extra...)...)
}
