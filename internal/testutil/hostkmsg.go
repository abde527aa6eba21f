package testutil

import (
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
)

// alarming are the words that make a kernel log line a GPU failure to
// whoever watches the host: this project's parsers and other tools
// (node-problem-detector, gpud, log alerting rules) look for the driver's
// "NVRM:" prefix and "Xid", and a line about a GPU off the bus pages its
// operators whatever its prefix. Matched without regard to case.
var alarming = []string{"nvrm", "xid", "fallen off the bus"}

// Alarming returns the first word of alarming that line holds, "" when
// none: a line that may go into a host's kernel log.
func Alarming(line string) string {
	l := strings.ToLower(line)
	for _, w := range alarming {
		if strings.Contains(l, w) {
			return w
		}
	}
	return ""
}

// HostKmsg opens the host's /dev/kmsg for writing, closed when t ends, or
// skips t saying why (it needs root; CI runs as root, where the test is not
// optional). The host's kernel log is not the test's: a line Alarming takes
// for a GPU failure fails t and is not written. Each Write is one record.
func HostKmsg(t testing.TB) io.Writer {
	t.Helper()
	f, err := os.OpenFile("/dev/kmsg", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("/dev/kmsg is not writable here (%v): this test of the real kernel log needs root (CI runs as root)", err)
	}
	t.Cleanup(func() { f.Close() })
	return hostKmsg{t: t, f: f}
}

// hostKmsg is HostKmsg's writer.
type hostKmsg struct {
	t testing.TB
	f *os.File
}

// Write writes p as one record unless Alarming refuses it; then it fails
// the test (Errorf: it may run on any goroutine) and writes nothing.
func (w hostKmsg) Write(p []byte) (int, error) {
	if word := Alarming(string(p)); word != "" {
		err := fmt.Errorf("refused to write %q to the host's /dev/kmsg: it holds %q (GPU alerting takes it for a failure)", p, word)
		w.t.Error(err)
		return 0, err
	}
	return w.f.Write(p)
}
