package fleet

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logfmt/logfmt"
)

// logfmtFields parses one line with a strict logfmt decoder (go-logfmt,
// what Loki's `| logfmt` and Vector's parse_logfmt accept): an error is a
// line a log pipeline cannot take apart. A bare word (a key without a
// value) is returned apart: a line of ours has none.
func logfmtFields(line string) (map[string]string, []string, error) {
	d := logfmt.NewDecoder(strings.NewReader(line))
	kv := map[string]string{}
	var bare []string
	for d.ScanRecord() {
		for d.ScanKeyval() {
			if d.Value() == nil {
				bare = append(bare, string(d.Key()))
				continue
			}
			if _, dup := kv[string(d.Key())]; dup {
				return nil, nil, fmt.Errorf("key %s twice", d.Key())
			}
			kv[string(d.Key())] = string(d.Value())
		}
	}
	return kv, bare, d.Err()
}

// TestEventsShippedByRsyslog runs one real shipper path end to end on
// loopback: Debian's rsyslog follows events.log (imfile) and forwards it
// over TCP (omfwd) to a second rsyslog (imtcp, on a port it picks and
// writes to a file) that writes what it receives to a file. The Xids played
// on the simulated GPU arrive there, each a line a strict logfmt parser
// takes apart into its fields; so does every line of events.log itself,
// values with spaces and quotes included.
func TestEventsShippedByRsyslog(t *testing.T) {
	rsyslogd := needTool(t, "rsyslogd", "rsyslog")
	work := t.TempDir()
	recv, send := filepath.Join(work, "recv"), filepath.Join(work, "send")
	for _, d := range []string{recv, send} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	portFile, received := filepath.Join(recv, "port"), filepath.Join(recv, "received.log")
	writeConf := func(path, text string) string {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// The receiving side: what a central rsyslog does, written to a file.
	startChild(t, rsyslogd, os.Environ(), "-n", "-i", filepath.Join(recv, "pid"), "-f", writeConf(filepath.Join(recv, "rsyslog.conf"), fmt.Sprintf(`
global(workDirectory=%[1]q)
module(load="imtcp")
template(name="line" type="string" string="%%msg%%\n")
ruleset(name="in") {
  action(type="omfile" file=%[2]q template="line")
}
input(type="imtcp" port="0" listenPortFileName=%[3]q ruleset="in")
`, recv, received, portFile)))
	var port string
	if !waitFor(20*time.Second, func() bool {
		b, _ := os.ReadFile(portFile)
		port = strings.TrimSpace(string(b))
		return port != ""
	}) {
		t.Fatal("the receiving rsyslog never wrote its port")
	}

	logDir := t.TempDir()
	start := time.Now().Add(-time.Second)
	startLogger(t, logDir, "ship.scn")
	events := filepath.Join(logDir, "events.log")
	// The host's side: the recipe in docs/shipping.md.
	startChild(t, rsyslogd, os.Environ(), "-n", "-i", filepath.Join(send, "pid"), "-f", writeConf(filepath.Join(send, "rsyslog.conf"), fmt.Sprintf(`
global(workDirectory=%[1]q)
module(load="imfile")
ruleset(name="gpu-telemetry") {
  action(type="omfwd" target="127.0.0.1" port=%[2]q protocol="tcp" template="RSYSLOG_SyslogProtocol23Format")
}
input(type="imfile" file=%[3]q tag="gpu-telemetry" severity="info" facility="local0" ruleset="gpu-telemetry")
`, send, port, events)))

	want := map[string]bool{"48": false, "79": false}
	var got []string
	if !waitFor(60*time.Second, func() bool {
		b, _ := os.ReadFile(received)
		got = strings.Split(strings.TrimSpace(string(b)), "\n")
		for _, l := range got {
			kv, _, err := logfmtFields(strings.TrimSpace(l))
			if err == nil && kv["type"] == "Xid" && kv["gpu"] == "0" {
				if _, ok := want[kv["xid"]]; ok {
					want[kv["xid"]] = true
				}
			}
		}
		return want["48"] && want["79"]
	}) {
		t.Fatalf("the Xids did not arrive on the receiving side (%v); it got:\n%s", want, strings.Join(got, "\n"))
	}
	t.Logf("%d events.log lines arrived through rsyslog", len(got))
	for _, l := range got {
		l = strings.TrimSpace(l)
		kv, bare, err := logfmtFields(l)
		if err != nil {
			t.Errorf("a received line is not logfmt (%v): %s", err, l)
			continue
		}
		if len(bare) != 0 {
			t.Errorf("a received line has bare words %q: %s", bare, l)
		}
		if ts, err := time.Parse(time.RFC3339Nano, kv["time"]); err != nil || !strings.HasSuffix(kv["time"], "Z") || ts.Before(start) {
			t.Errorf("a received line's time= is not a UTC time of this run (%v): %s", err, l)
		}
		if kv["host"] != testHost {
			t.Errorf("a received line does not name its host (%s): %s", testHost, l)
		}
		if kv["type"] == "Xid" {
			for _, k := range []string{"gpu", "uuid", "bus", "level", "source", "xid", "name", "class", "action", "incident", "snapshot"} {
				if kv[k] == "" {
					t.Errorf("a received Xid line lacks %s: %s", k, l)
				}
			}
			// The snapshot it names is on disk, under the logger's crashes/.
			if p := kv["snapshot"]; filepath.Dir(p) != filepath.Join(logDir, "crashes") || !waitFor(10*time.Second, func() bool { _, err := os.Stat(p); return err == nil }) {
				t.Errorf("a received Xid line names snapshot %s, not a crash snapshot of this logger", p)
			}
		}
	}

	// events.log itself: every line strict logfmt, with the quotes of the
	// Xid 48 advice undone.
	b, err := os.ReadFile(events)
	if err != nil {
		t.Fatal(err)
	}
	quoted := false
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		kv, _, err := logfmtFields(string(l))
		if err != nil {
			t.Errorf("events.log line is not logfmt (%v): %s", err, l)
		}
		if strings.Contains(kv["action"], `"framebuffer"`) {
			quoted = true
		}
	}
	if !quoted {
		t.Errorf("no events.log line had the Xid 48 advice with its quoted word:\n%s", b)
	}
}
