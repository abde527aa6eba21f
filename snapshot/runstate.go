package snapshot

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// Files in the log directory that tell, at the next start, how the last run
// ended. run-state is written at start (boot id, start time, PID); the
// clean-stop marker is written last at a clean shutdown, after the final
// fsync of every log, and removed at start. A run-state without a marker is
// an unclean stop: host hang, power cut, kernel panic, SIGKILL, OOM kill.
const (
	RunStateFile  = "run-state"
	CleanStopFile = "clean-stop"
)

// DefaultBootIDPath is where the kernel gives this boot's random id.
const DefaultBootIDPath = "/proc/sys/kernel/random/boot_id"

// RunState is what a run records about itself at start.
type RunState struct {
	BootID  string
	Started time.Time
	PID     int
}

// PreviousRun is what BeginRun found of the run before this one.
type PreviousRun struct {
	Found bool     // a run-state existed: the logger ran here before
	Clean bool     // and it stopped cleanly
	State RunState // its run-state (when Found)
}

// Unclean reports whether the previous run ended without a clean stop.
func (p PreviousRun) Unclean() bool { return p.Found && !p.Clean }

// ReadBootID returns this boot's id, or "" when the kernel does not say.
func ReadBootID(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// BeginRun reads how the previous run in dir ended, removes its clean-stop
// marker and records this run (cur). It does only small file operations, so
// it can sit on the start-up path; the evidence of an unclean stop is
// collected afterwards by WriteBootLog. An error means this run could not
// be recorded (the next start will not know how it ended); prev is still
// valid.
func BeginRun(dir string, cur RunState) (prev PreviousRun, err error) {
	b, rerr := os.ReadFile(filepath.Join(dir, RunStateFile))
	if rerr == nil {
		prev.Found = true
		prev.State = parseRunState(b)
		_, serr := os.Stat(filepath.Join(dir, CleanStopFile))
		prev.Clean = serr == nil
	} else if !errors.Is(rerr, fs.ErrNotExist) {
		return prev, fmt.Errorf("read %s: %w", RunStateFile, rerr)
	}
	if err := os.Remove(filepath.Join(dir, CleanStopFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return prev, fmt.Errorf("remove %s: %w", CleanStopFile, err)
	}
	var s strings.Builder
	s.WriteString("boot_id=" + cur.BootID + "\n")
	s.WriteString("started=" + cur.Started.Format(time.RFC3339Nano) + "\n")
	s.WriteString("pid=" + strconv.Itoa(cur.PID) + "\n")
	if err := sink.WriteFileAtomic(filepath.Join(dir, RunStateFile), []byte(s.String()), 0o644); err != nil {
		return prev, err
	}
	return prev, nil
}

// MarkCleanStop writes the clean-stop marker. Call it last at shutdown,
// after every log is flushed and synced.
func MarkCleanStop(dir string, at time.Time) error {
	return sink.WriteFileAtomic(filepath.Join(dir, CleanStopFile), []byte("stopped="+at.Format(time.RFC3339Nano)+"\n"), 0o644)
}

func parseRunState(b []byte) RunState {
	var s RunState
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		switch k {
		case "boot_id":
			s.BootID = v
		case "started":
			s.Started, _ = time.Parse(time.RFC3339Nano, v)
		case "pid":
			s.PID, _ = strconv.Atoi(v)
		}
	}
	return s
}
