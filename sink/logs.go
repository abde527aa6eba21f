package sink

import (
	"fmt"
	"path/filepath"
	"sync"

	"gopkg.in/natefinch/lumberjack.v2"
)

// LineLog is an append-only text log rotated by size (events.log,
// summary.log). Lines are written whole, one write per line.
type LineLog struct {
	mu     sync.Mutex
	lj     *lumberjack.Logger
	buf    []byte
	closed bool
}

// NewLineLog returns a log at dir/name rotated at maxMB megabytes, keeping
// backups rotated copies.
func NewLineLog(dir, name string, maxMB, backups int) *LineLog {
	return &LineLog{lj: &lumberjack.Logger{
		Filename:   filepath.Join(dir, name),
		MaxSize:    maxMB,
		MaxBackups: backups,
		LocalTime:  true,
	}}
}

// Line appends one line; a trailing newline is added.
func (l *LineLog) Line(s string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		// lumberjack would reopen the file: a late writer (a call that
		// came back from the driver after shutdown) must not.
		return fmt.Errorf("write %s: closed", l.lj.Filename)
	}
	l.buf = append(append(l.buf[:0], s...), '\n')
	if _, err := l.lj.Write(l.buf); err != nil {
		return fmt.Errorf("write %s: %w", l.lj.Filename, err)
	}
	return nil
}

// Reopen closes the file; the next line reopens it by name (SIGHUP).
func (l *LineLog) Reopen() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lj.Close()
}

// Close closes the file for good; later lines are refused.
func (l *LineLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	return l.lj.Close()
}

// Path returns the log's path.
func (l *LineLog) Path() string { return l.lj.Filename }
