// Command gpu-telemetry records what NVIDIA GPUs were doing in the seconds
// before they crash: every GPU sampled every 100 ms into daily CSVs, anomaly
// flags, NVML and kernel-log Xid events, and crash snapshots.
//
// This file only parses flags, validates them and wires the parts together;
// the work is done in the sampler, anomaly, sink, snapshot and monitor
// packages.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kong"
	"github.com/gofrs/flock"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/monitor"
	"github.com/gpu-telemetry/gpu-telemetry/sampler"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// version is set at build time (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	// One P is enough: the work is a few microseconds per GPU per tick, and a
	// second P makes every wake-up cost more (idle Ps are woken to spin and
	// steal). Hang isolation does not need a second P: a goroutine stuck in a
	// cgo call releases its P to the scheduler. GOMAXPROCS in the
	// environment still wins.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole program; it returns the exit status. Help and the
// version go to stdout, messages to stderr.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		if args[0] == "help" {
			return runHelp(args[1:], stdout, stderr)
		}
		c, ok := lookupCommand(args[0])
		if !ok {
			fmt.Fprintf(stderr, "gpu-telemetry: unknown command %q (commands: %s; the logger itself takes only flags)\n", args[0], commandNames())
			return 2
		}
		return c.run(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == manFlag {
		return writeMan(stdout, stderr)
	}
	cli := newCLI()
	if code, ok := parseFlags(cli, "gpu-telemetry", args, stdout, stderr,
		kong.Description(loggerDescription), kong.Help(topHelp),
		kong.Vars{"version": "gpu-telemetry " + version}); !ok {
		return code
	}
	if err := cli.Validate(); err != nil {
		fmt.Fprintf(stderr, "gpu-telemetry: %v\n", err)
		return 2
	}
	if err := cli.checkSystem(); err != nil {
		fmt.Fprintf(stderr, "gpu-telemetry: %v\n", err)
		return 2
	}
	return serve(cli, stderr)
}

// serve runs the logger with validated flags.
func serve(cli *CLI, stderr io.Writer) int {
	// Signals first: SIGHUP's default action kills the process, and the
	// start-up (NVML init, a GPU stuck at start) can take seconds, during
	// which a log rotation or a reload must not end the service.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGHUP)
	defer signal.Stop(sigs)

	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cli.LogLevel.level()}))
	// A log dir that cannot be made or written is bad input (2), as a bad
	// flag: the operator named it.
	if err := os.MkdirAll(cli.LogDir, 0o755); err != nil {
		fmt.Fprintf(stderr, "gpu-telemetry: --log-dir %s: %v\n", cli.LogDir, errors.Unwrap(err))
		return 2
	}
	// Checked again now that it exists: made by someone else meanwhile (in
	// a sticky /tmp), it is theirs and refused.
	if err := monitor.CheckLogDir(cli.LogDir); err != nil {
		fmt.Fprintf(stderr, "gpu-telemetry: --log-dir %s: %v\n", cli.LogDir, err)
		return 2
	}
	if err := checkWritable(cli.LogDir); err != nil {
		fmt.Fprintf(stderr, "gpu-telemetry: --log-dir %s: %v\n", cli.LogDir, err)
		return 2
	}
	if err := cli.makeRunDir(); err != nil {
		fmt.Fprintf(stderr, "gpu-telemetry: %s: %v\n", runDir, errors.Unwrap(err))
		return 1
	}
	unlock, removeLocks, err := takeLocks(cli.LockFile, cli.LogDir)
	if err != nil {
		fmt.Fprintf(stderr, "gpu-telemetry: %v\n", err)
		return 1
	}
	defer unlock()

	// The kernel log before NVML: what the kernel logs while the start-up
	// waits on a stuck GPU (up to --start-timeout) is kept in its ring for
	// the monitor, and a restart in this boot reads what was logged while
	// no logger ran. Run closes it; Close is for the paths that never run.
	mcfg := cli.monitorConfig(log)
	mcfg.Counters = counters.New() // the daemon's one registry: every part counts in it
	mcfg.KernelLog = monitor.OpenKernelLog(mcfg)
	defer mcfg.KernelLog.Close()

	host, err := sampler.Open(sampler.NewNVML(), sampler.OpenOptions{
		Select:   cli.GPU,
		Config:   sampler.DefaultConfig(time.Duration(cli.Interval)),
		Timeout:  time.Duration(cli.StartTimeout),
		Logger:   log,
		Counters: mcfg.Counters,
	})
	switch {
	case errors.Is(err, sampler.ErrNoDriver), errors.Is(err, sampler.ErrNoGPU):
		// Nothing to monitor is not a failure (as atopgpud): systemd must
		// not restart us in a loop on a host without GPUs.
		// Nor does it leave a lock file behind: nothing ran.
		log.Warn("nothing to monitor; exiting", "reason", err.Error())
		removeLocks()
		return 0
	case errors.Is(err, sampler.ErrUnknownGPU):
		// A selector that names no GPU is bad input, as a bad flag, and
		// leaves nothing behind either.
		removeLocks()
		fmt.Fprintf(stderr, "gpu-telemetry: --gpu %v\n", strings.TrimPrefix(err.Error(), sampler.ErrUnknownGPU.Error()+": "))
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "gpu-telemetry: %v\n", err)
		return 1
	}
	info := host.System
	log.Info("gpu-telemetry starting", "version", version, "driver", info.DriverVersion, "nvml", info.NVMLVersion, "gpus", len(host.GPUs))
	for _, g := range host.GPUs {
		i := g.Info()
		log.Info("GPU", "index", i.Index, "name", i.Name, "uuid", i.UUID, "bus", i.BusID, "fans", i.NumFans, "gsp", i.GSPVersion)
	}

	mon, err := monitor.New(mcfg, host)
	if err != nil {
		host.Close(2 * time.Second)
		fmt.Fprintf(stderr, "gpu-telemetry: %v\n", err)
		return 1
	}
	if ctx.Err() != nil { // stopped while starting
		host.Close(2 * time.Second)
		log.Info("stopped before sampling began")
		return 0
	}
	stopListeners, err := startListeners(ctx, cli, mon.Board(), ackVia(mon), log, mcfg.Counters)
	if err != nil {
		host.Close(2 * time.Second)
		fmt.Fprintf(stderr, "gpu-telemetry: %v\n", err)
		return 1
	}
	defer stopListeners()
	if err := mon.Run(ctx, sigs); err != nil {
		fmt.Fprintf(stderr, "gpu-telemetry: %v\n", err)
		return 1
	}
	return 0
}

// checkWritable fails early, with one line, when the log dir cannot be
// written (rather than at the first row).
func checkWritable(dir string) error {
	f, err := os.CreateTemp(dir, ".write-test-*")
	if err != nil {
		return fmt.Errorf("not writable: %w", errors.Unwrap(err))
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// logDirLock is the lock file inside --log-dir.
const logDirLock = monitor.LockFile

// takeLocks takes --lock-file and the log dir's own lock: two loggers with
// different --lock-file (a manual run next to the service) must not append
// to the same CSVs and take over run-state and clean-stop. When --lock-file
// is the log dir's lock file, by whatever path (relative, through a link),
// it is taken once: flock refuses a second descriptor of the same file even
// in the same process. remove deletes the lock files while they are still
// held (for a run that ends before it recorded anything); unlock releases
// them.
func takeLocks(lockFile, logDir string) (unlock, remove func(), err error) {
	lock, err := takeLock("--lock-file", lockFile)
	if err != nil {
		return nil, nil, err
	}
	dl := filepath.Join(logDir, logDirLock)
	if a, err := os.Stat(lockFile); err == nil {
		if b, err := os.Stat(dl); err == nil && os.SameFile(a, b) {
			return func() { lock.Unlock() }, func() { os.Remove(lockFile) }, nil
		}
	}
	dirLock, err := takeLock("--log-dir", dl)
	if err != nil {
		lock.Unlock()
		return nil, nil, err
	}
	return func() { dirLock.Unlock(); lock.Unlock() }, func() { os.Remove(dl); os.Remove(lockFile) }, nil
}

// takeLock takes a single-instance lock (flag names what it guards in the
// messages) and writes our PID into it. When another instance holds it, the
// error names the file and the holder's PID.
// Its directory must exist (checkSystem): it is never created.
//
// The file is opened without following a link (checkSystem refused one
// already; this holds for one planted since), and the PID is written
// through a descriptor of that same file, never by name.
func takeLock(flag, path string) (*flock.Flock, error) {
	l := flock.New(path, flock.SetFlag(os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW), flock.SetPermissions(0o644))
	ok, err := l.TryLock()
	if err != nil {
		return nil, fmt.Errorf("%s: lock file %s: %w", flag, path, err)
	}
	if !ok {
		holder := "unknown"
		if b, err := os.ReadFile(path); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				holder = strconv.Itoa(pid)
			}
		}
		return nil, fmt.Errorf("another gpu-telemetry is running (pid %s): %s lock file %s is held", holder, flag, path)
	}
	// flock locks the inode, so writing through a second descriptor is fine.
	if err := writePID(l, path); err != nil {
		l.Unlock()
		return nil, fmt.Errorf("%s: lock file %s: %w", flag, path, err)
	}
	return l, nil
}

// writePID writes our PID into the lock file l holds, through a second
// descriptor (flock keeps its own to itself) opened without following a
// link and checked to be the very file locked.
func writePID(l *flock.Flock, path string) error {
	f, err := sink.OpenNoFollow(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	locked, err := l.Stat()
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !os.SameFile(locked, fi) {
		return errors.New("replaced while being locked")
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err = f.Write([]byte(strconv.Itoa(os.Getpid()) + "\n"))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
