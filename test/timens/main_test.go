package main

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestOffset(t *testing.T) {
	for _, tc := range []struct {
		name      string
		now, want time.Duration
		off       int64
	}{
		{"up for hours", 5*time.Hour + 300*time.Millisecond, 3 * time.Minute, -(5*3600 - 180)},
		{"up for less than wanted", 100 * time.Second, 3 * time.Minute, 80},
		{"a fraction rounds up", 180*time.Second - time.Millisecond, 3 * time.Minute, 1},
		{"exact", 3 * time.Minute, 3 * time.Minute, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			off := offset(tc.now, tc.want)
			if off != tc.off {
				t.Errorf("offset(%v, %v) = %d, want %d", tc.now, tc.want, off, tc.off)
			}
			if got := tc.now + time.Duration(off)*time.Second; got < tc.want || got >= tc.want+time.Second {
				t.Errorf("the clock reads %v, want %v to %v", got, tc.want, tc.want+time.Second)
			}
		})
	}
}

// TestWhy: the one line printed where no namespace can be made says why.
func TestWhy(t *testing.T) {
	exit := errors.New("exit status 1")
	for _, tc := range []struct {
		err  error
		out  string
		want string
	}{
		{&exec.Error{Name: "unshare", Err: exec.ErrNotFound}, "", "no unshare(1)"},
		{exit, "unshare: unrecognized option '--time'\nTry 'unshare --help'\n", "unshare: unrecognized option '--time'; util-linux 2.36 or later"},
		{exit, "unshare: unshare failed: Operation not permitted\n", "Operation not permitted; a time namespace needs CAP_SYS_ADMIN"},
		{exit, "unshare: unshare failed: Invalid argument\n", "no time namespaces"},
		{exit, "", "unshare --time: exit status 1"},
	} {
		if got := why(tc.err, []byte(tc.out)); !strings.Contains(got, tc.want) || strings.Contains(got, "\n") {
			t.Errorf("why(%v, %q) = %q, want one line with %q", tc.err, tc.out, got, tc.want)
		}
	}
}

// TestUsage: no command is a usage error, not a run of nothing.
func TestUsage(t *testing.T) {
	var b bytes.Buffer
	if code := run([]string{"-uptime", "3m"}, &b); code != 2 || !strings.Contains(b.String(), "usage:") {
		t.Errorf("run without a command: %d, %q", code, b.String())
	}
}
