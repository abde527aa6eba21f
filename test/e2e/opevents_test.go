package e2e

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// linesWith returns the events.log lines of dir that hold every one of subs.
func linesWith(dir string, subs ...string) []string {
	var out []string
	for _, l := range strings.Split(events(dir), "\n") {
		ok := l != ""
		for _, s := range subs {
			ok = ok && strings.Contains(l, s)
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

// TestOperationalEventsDecoded: GPU operational events (R615+) reach
// events.log with every field decoded, an unknown severity, log level and
// attribute bit as numbers; a corrected one is no incident; overflow is
// counted as lost work, logged the first time; the start says the GPUs'
// operational events are subscribed.
func TestOperationalEventsDecoded(t *testing.T) {
	t.Parallel()
	scn := "gpus 2\n" +
		"at 1 gpu 0 opevent severity corrected level warning category 3 attrs latent|threshold_exceeded group recovered code 17 module GSP mig 1 0 context 9\n" +
		"at 1.5 gpu 0 opevent severity 45 level 35 category 8 attrs 0x400\n" +
		"at 2 gpu 1 opevent severity recoverable attrs overflow category 4\n"
	p := start(t, opts{scenario: scn})
	p.waitForEvent("the three operational events", 30*time.Second, "category=3 ", "category=8 ", "category=4 ")
	p.waitFor("the overflow's first log", 10*time.Second, func() bool {
		return strings.Contains(p.stderr.String(), "counter=op_event_overflows")
	})
	p.stop()
	for _, want := range [][]string{
		{"gpu=0 ", "source=nvml-op type=OP_EVENT severity=corrected log_level=warning category=3 attributes=latent|threshold_exceeded group_attributes=recovered recovered=true module=GSP module_event_code=17 ",
			" gpu_instance=1 compute_instance=0 ", " sequence=", " event_time=", " contexts=1 context0=unknown,source_type:9,size:4,version:1"},
		{"gpu=0 ", "type=OP_EVENT severity=45 log_level=35 category=8 attributes=0x400 "},
		{"gpu=1 ", "type=OP_EVENT severity=recoverable ", " attributes=overflow "},
	} {
		if l := linesWith(p.dir, want...); len(l) != 1 {
			t.Errorf("events.log: %d lines with %q, want 1:\n%s", len(l), want, events(p.dir))
		}
	}
	if l := linesWith(p.dir, "type=OP_EVENT", "critical="); len(l) != 0 {
		t.Errorf("no event here is fatal or uncontained: %q", l)
	}
	if c := snapshots(p.dir, "crash-*.log"); len(c) != 0 {
		t.Errorf("crash snapshots %v, want none", c)
	}
	errs := p.stderr.String()
	if n := strings.Count(errs, "GPU operational events subscribed"); n != 2 {
		t.Errorf("%d subscription lines, want one a GPU", n)
	}
	if !regexp.MustCompile(`final status.* op_event_overflows=1 `).MatchString(errs) {
		t.Errorf("final status does not count the overflow:\n%s", errs)
	}
}

// TestOperationalXid79IsTheKernelsIncident: an operational event carrying
// the legacy Xid 79 and the kernel's Xid 79 line are one incident: the
// second to arrive marked the duplicate of the first, one crash snapshot,
// one critical event logged.
func TestOperationalXid79IsTheKernelsIncident(t *testing.T) {
	t.Parallel()
	scn := "gpus 1\n" +
		"at 2 gpu 0 opevent severity fatal level error category 2 xid 79\n" +
		"at 2 gpu 0 xid 79\n" // kmsg only, as the driver does
	p := start(t, opts{scenario: scn, kmsg: true})
	p.waitForEvent("both reports of Xid 79", 30*time.Second, "source=nvml-op type=Xid xid=79 ", "source=kmsg type=Xid xid=79 ")
	p.waitFor("the crash snapshot", 30*time.Second, func() bool { return len(snapshots(p.dir, "crash-*-gpu0.log")) > 0 })
	time.Sleep(time.Second)
	p.stop()
	x79 := linesWith(p.dir, " xid=79 ")
	if len(x79) != 2 || strings.Contains(x79[0], "duplicate_of=") || !strings.Contains(x79[1], "duplicate_of=") {
		t.Fatalf("Xid 79 from the operational event and the kernel should be one incident, the second marked duplicate:\n%s", events(p.dir))
	}
	op := linesWith(p.dir, "source=nvml-op type=Xid xid=79 ")[0]
	for _, want := range []string{" severity=fatal ", " log_level=error ", " category=2 ", " contexts=1 ", " context0=legacy_xid,source_type:1,size:4,version:1,xid:79"} {
		if !strings.Contains(op, want) {
			t.Errorf("operational Xid line lacks %q:\n%s", want, op)
		}
	}
	if c := snapshots(p.dir, "crash-*-gpu0.log"); len(c) != 1 {
		t.Errorf("crash snapshots %v, want 1", c)
	}
	errs := p.stderr.String()
	if n := strings.Count(errs, "critical GPU event"); n != 1 {
		t.Errorf("%d critical events logged, want 1", n)
	}
	if !regexp.MustCompile(`final status.* crash_snapshots_suppressed=0 `).MatchString(errs) || !regexp.MustCompile(`final status.* duplicate_xids=1 `).MatchString(errs) {
		t.Errorf("final status: want no suppressed snapshot and one duplicate Xid:\n%s", errs)
	}
}

// TestFatalOperationalEventRaisesAnIncident: a fatal operational event
// without a legacy Xid, and an uncontained one, are incidents with a crash
// snapshot.
func TestFatalOperationalEventRaisesAnIncident(t *testing.T) {
	t.Parallel()
	scn := "gpus 2\n" +
		"at 1 gpu 0 opevent severity fatal category 5 code 300\n" +
		"at 1 gpu 1 opevent severity recoverable attrs uncontained|component_reset category 6\n"
	p := start(t, opts{scenario: scn})
	p.waitFor("both crash snapshots", 30*time.Second, func() bool {
		return len(snapshots(p.dir, "crash-*-gpu0.log")) == 1 && len(snapshots(p.dir, "crash-*-gpu1.log")) == 1
	})
	p.stop()
	for _, want := range [][]string{
		{"gpu=0 ", "type=OP_EVENT severity=fatal ", " critical=fatal", " incident="},
		{"gpu=1 ", "type=OP_EVENT severity=recoverable ", "attributes=uncontained|component_reset ", " critical=uncontained", " incident="},
	} {
		if l := linesWith(p.dir, want...); len(l) != 1 {
			t.Errorf("events.log: %d lines with %q, want 1:\n%s", len(l), want, events(p.dir))
		}
	}
	snap := readFile(t, snapshots(p.dir, "crash-*-gpu0.log")[0])
	if !strings.Contains(snap, "GPU operational event (fatal)") {
		t.Errorf("crash snapshot does not name the event:\n%.2000s", snap)
	}
	if n := strings.Count(p.stderr.String(), "critical GPU event"); n != 2 {
		t.Errorf("%d critical events logged, want 2", n)
	}
}

// TestOldDriverLacksOperationalEvents: a driver without the operational
// events' functions (before R615) says so in one start line and nothing
// else changes: the scenario's operational event never arrives, its Xid
// still comes through NVML's Xid event.
func TestOldDriverLacksOperationalEvents(t *testing.T) {
	t.Parallel()
	scn := "gpus 2\n" +
		"at 1 gpu 0 opevent severity fatal xid 79\n" +
		"at 2 gpu 1 xid 13\n"
	p := start(t, opts{scenario: scn, oldLib: true})
	p.waitForEvent("the Xid 13 event", 30*time.Second, "source=nvml type=Xid xid=13 ")
	time.Sleep(time.Second)
	p.stop()
	errs := p.stderr.String()
	if n := strings.Count(errs, "driver lacks GPU operational events"); n != 1 {
		t.Errorf("%d lines say the driver lacks operational events, want 1:\n%s", n, errs)
	}
	if strings.Contains(errs, "GPU operational events subscribed") || strings.Contains(errs, "GPU operational events refused") {
		t.Errorf("operational events subscribed on an old driver:\n%s", errs)
	}
	ev := events(p.dir)
	if strings.Contains(ev, "nvml-op") || strings.Contains(ev, "OP_EVENT") || strings.Contains(ev, " xid=79 ") {
		t.Errorf("an operational event on an old driver:\n%s", ev)
	}
	if c := snapshots(p.dir, "crash-*-gpu0.log"); len(c) != 0 {
		t.Errorf("crash snapshots of GPU 0 %v, want none", c)
	}
}
