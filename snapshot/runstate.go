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

	"github.com/gpu-telemetry/gpu-telemetry/reading"
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

// RunState is what a run records about itself: at start, and when the
// kernel log position changes (refreshed while it runs and at stop).
type RunState struct {
	BootID  string
	Started time.Time
	PID     int
	// KmsgSeq is the sequence number of the last /dev/kmsg record the run
	// handed on: a restart in the same boot (same BootID) reads the
	// kernel's ring from there, so that the records written while no
	// logger was reading are not lost. Absent when the kernel log is not
	// /dev/kmsg, or not read.
	KmsgSeq reading.Opt[uint64]
	// GPUs are the boards the run monitors (index, UUID, serial, bus id):
	// the next start compares its own with them (sink.CompareInventory).
	// A GPU stuck at start is added once it answers.
	GPUs []sink.Board
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
	prev.State, prev.Found, err = ReadRunState(dir)
	if err != nil {
		return prev, err
	}
	if prev.Found {
		_, serr := os.Stat(filepath.Join(dir, CleanStopFile))
		prev.Clean = serr == nil
	}
	if err := os.Remove(filepath.Join(dir, CleanStopFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return prev, fmt.Errorf("remove %s: %w", CleanStopFile, err)
	}
	return prev, WriteRunState(dir, cur)
}

// runStateMax bounds what is read of run-state (a run's is a few lines
// and one line per GPU, under 64 KiB with hundreds of GPUs): whatever the
// log directory holds there, the start reads no more.
const runStateMax = 1 << 20

// ReadRunState returns the run-state in dir, as the last run left it (this
// run's once BeginRun wrote it); found is false when there is none. What is
// not a regular file is an error, never waited on (a FIFO).
func ReadRunState(dir string) (s RunState, found bool, err error) {
	b, err := sink.ReadBounded(sink.OpenRegular, filepath.Join(dir, RunStateFile), runStateMax, false)
	if errors.Is(err, fs.ErrNotExist) {
		return RunState{}, false, nil
	}
	if err != nil {
		return RunState{}, false, fmt.Errorf("read %s: %w", RunStateFile, err)
	}
	return parseRunState(b), true, nil
}

// WriteRunState replaces the run-state in dir with s, atomically: a crash
// leaves the old file or the new one, never a mix.
func WriteRunState(dir string, s RunState) error {
	var b strings.Builder
	b.WriteString("boot_id=" + s.BootID + "\n")
	b.WriteString("started=" + s.Started.Format(time.RFC3339Nano) + "\n")
	b.WriteString("pid=" + strconv.Itoa(s.PID) + "\n")
	if seq, ok := s.KmsgSeq.Get(); ok {
		b.WriteString("kmsg_seq=" + strconv.FormatUint(seq, 10) + "\n")
	}
	for _, g := range s.GPUs {
		if g.UUID != "" {
			b.WriteString("board=" + g.Text() + "\n")
		}
	}
	return sink.WriteFileAtomic(filepath.Join(dir, RunStateFile), []byte(b.String()), 0o644)
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
		case "board":
			if g, ok := sink.ParseBoard(v); ok {
				s.GPUs = append(s.GPUs, g)
			}
		case "kmsg_seq":
			if seq, err := strconv.ParseUint(v, 10, 64); err == nil {
				s.KmsgSeq = reading.Some(seq)
			}
		}
	}
	return s
}
