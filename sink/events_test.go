package sink

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logfmt/logfmt"
)

// TestEventClass is the spec of which events.log lines tell of trouble: every
// type the logger writes, with the fields that change its class.
func TestEventClass(t *testing.T) {
	cases := []struct {
		name   string
		fields string
		want   EventClass
	}{
		{"Xid", "source=nvml type=Xid xid=79", EventIncident},
		{"Xid reported again", "source=kmsg type=Xid xid=79 duplicate_of=nvml", EventNotable},
		{"GpuRecoveryAction", "source=nvml type=GpuRecoveryAction action=1", EventIncident},
		{"GPU_LOST", "type=GPU_LOST source=poll", EventIncident},
		{"NVML_HUNG", "type=NVML_HUNG function=nvmlDeviceGetPowerUsage", EventIncident},
		{"NVML_FAILED", `type=NVML_FAILED error="Unknown Error"`, EventIncident},
		{"AER fatal", "source=kmsg type=AER severity=uncorrectable-fatal device=0000:41:00.0", EventIncident},
		{"AER non-fatal", "source=kmsg type=AER severity=uncorrectable-nonfatal device=0000:41:00.0", EventIncident},
		{"AER corrected", "source=kmsg type=AER severity=corrected device=0000:40:01.1", EventNotable},
		{"AER unknown severity", "source=kmsg type=AER severity=unknown device=0000:40:01.1", EventNotable},
		{"AER whose text names a severity", `source=kmsg type=AER severity=corrected text="AER: severity=Uncorrected (Fatal), type=Transaction Layer"`, EventNotable},
		{"FALLEN_OFF_BUS", "source=kmsg type=FALLEN_OFF_BUS", EventIncident},
		{"RM_INIT_FAILED", "source=kmsg type=RM_INIT_FAILED", EventIncident},
		{"GSP_TIMEOUT", "source=kmsg type=GSP_TIMEOUT", EventIncident},
		{"GSP_CRASH", "source=kmsg type=GSP_CRASH", EventIncident},
		{"SXid", "source=kmsg type=SXid switch=3 sxid=15009 name=\"route GLT DBE\" severity=fatal", EventNotable},
		{"UNCLEAN_STOP", "source=start type=UNCLEAN_STOP same_boot=false", EventIncident},
		{"TDP_CHANGE", "type=TDP_CHANGE from=600W to=450W delta=-150W", EventNotable},
		{"PState", "source=nvml type=PState data=1", EventRoutine},
		{"Clock", "source=nvml type=Clock data=4", EventRoutine},
		{"ClockBurst", "source=nvml type=ClockBurst events=20 window=1s", EventRoutine},
		{"NVML_RECOVERED", "type=NVML_RECOVERED failures=3", EventRoutine},
		{"GPU_ENUMERATED_AGAIN", "source=poll type=GPU_ENUMERATED_AGAIN", EventRoutine},
		{"KERNEL_LINES_SUPPRESSED", "source=kmsg type=KERNEL_LINES_SUPPRESSED kind=AER/corrected lines=40", EventRoutine},
		{"XID_LINES_SUPPRESSED", "type=XID_LINES_SUPPRESSED xid=13 lines=40 window=1m0s", EventRoutine},
		{"HEALTH_EVENT critical", "source=nvml type=HEALTH_EVENT event=DoubleBitEccError severity=critical data=0", EventIncident},
		{"HEALTH_EVENT notable", "source=nvml type=HEALTH_EVENT event=SingleBitEccError severity=notable data=0", EventNotable},
		{"OP_EVENT fatal", "source=nvml-op type=OP_EVENT severity=fatal attributes=none critical=fatal", EventIncident},
		{"OP_EVENT uncontained", "source=nvml-op type=OP_EVENT severity=recoverable attributes=uncontained critical=uncontained", EventIncident},
		{"OP_EVENT corrected", "source=nvml-op type=OP_EVENT severity=corrected attributes=overflow", EventNotable},
		{"HEALTH_BASELINE", "type=HEALTH_BASELINE ecc_mode=1 ecc_sbe_volatile=0", EventRoutine},
		{"HEALTH", "type=HEALTH counter=ecc_sbe_volatile from=3 to=5 delta=+2", EventNotable},
		{"HEALTH_WARNING", `type=HEALTH_WARNING reason=remap_pending detail="a row remap waits for a GPU reset"`, EventNotable},
		{"HEALTH_CRITICAL", `type=HEALTH_CRITICAL reason=ecc_dbe detail="double-bit ECC errors since the driver loaded"`, EventIncident},
		{"INVENTORY missing", "source=start type=INVENTORY change=missing prev_gpu=0", EventNotable},
		{"INVENTORY new", "source=start type=INVENTORY change=new", EventRoutine},
		{"INVENTORY moved", "source=start type=INVENTORY change=moved prev_gpu=1", EventRoutine},
		{"INVENTORY identified", "source=poll type=INVENTORY change=identified prev_gpu=0", EventRoutine},
		{"GPU_MISSING", `source=start type=GPU_MISSING detail="GPU-a (serial 1) at 0000:4b:00.0 missing since this boot" prev_gpu=0`, EventIncident},
		{"ACTION", `type=ACTION action=reboot from=none reason="Xid 79 GPU has fallen off the bus: NVIDIA's resolution RESTART_BM"`, EventNotable},
		{"ACK", `source=socket type=ACK action=reboot by=root note=reseated classes=xid79`, EventRoutine},
		{"FAN_GUARD engaged", "type=FAN_GUARD kind=engaged fan=0 speed_pct=78 firmware_pct=53 temp_c=73 reason=temperature", EventNotable},
		{"FAN_GUARD set", "type=FAN_GUARD kind=set fan=0 speed_pct=80 firmware_pct=53 temp_c=74", EventRoutine},
		{"FAN_GUARD released", "type=FAN_GUARD kind=released fan=0 speed_pct=80 firmware_pct=53 temp_c=60 reason=cooled", EventRoutine},
		{"FAN_GUARD refused", `type=FAN_GUARD kind=refused reason="nvmlDeviceSetFanSpeed_v2: Insufficient Permissions"`, EventNotable},
		{"CPER", "source=nvml type=CPER record_id=1000 severity=fatal sections=nvidia length=216 file=crashes/cper-x.bin", EventNotable},
		{"FABRIC_SERVICE stopped", "source=proc type=FABRIC_SERVICE service=nvidia-fabricmanager state=stopped pid=1234", EventNotable},
		{"FABRIC_SERVICE running", "source=proc type=FABRIC_SERVICE service=nvidia-fabricmanager state=running pid=1300", EventRoutine},
		{"Xid inside a routine line's text", `source=nvml type=PState text="type=Xid"`, EventRoutine},
	}
	var named []string
	written := map[string]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, ok := ParseEventLine("2026-11-30T19:08:17.623Z gpu=0 bus=00000000:01:00.0 " + c.fields)
			if !ok {
				t.Fatalf("line did not parse")
			}
			if got := e.Class(); got != c.want {
				t.Errorf("class %d, want %d", got, c.want)
			}
		})
		e, _ := ParseEventLine("2026-11-30T19:08:17.623Z " + c.fields)
		written[e.Type()] = true
		if c.want != EventRoutine && !slices.Contains(named, e.Type()) {
			named = append(named, e.Type())
		}
	}
	// The cases spell every type out as the files hold it: a type
	// constant's string cannot change unnoticed.
	for typ := range eventClasses {
		if !written[typ] {
			t.Errorf("type %q has no case above", typ)
		}
	}
	slices.Sort(named)
	if got := EventTypes(); !slices.Equal(got, named) {
		t.Errorf("EventTypes() = %q, want the types above that are not routine: %q", got, named)
	}
}

func TestParseEventLine(t *testing.T) {
	e, ok := ParseEventLine(`2026-11-30T19:08:17.623Z gpu=0 source=kmsg type=Xid xid=62 name="Internal micro-controller halt" text="NVRM: \"x\" y"`)
	want := map[string]string{"gpu": "0", "source": "kmsg", "type": "Xid", "xid": "62", "name": "Internal micro-controller halt", "text": `NVRM: "x" y`}
	if !ok || !e.Time.Equal(time.Date(2026, 11, 30, 19, 8, 17, 623e6, time.UTC)) || len(e.KV) != len(want) {
		t.Fatalf("ParseEventLine = %+v, %v", e, ok)
	}
	for k, v := range want {
		if e.KV[k] != v {
			t.Errorf("%s=%q, want %q", k, e.KV[k], v)
		}
	}
	for _, bad := range []string{
		"",
		"2026-11-30T19:08:17.623Z",
		"2026-11-30 gpu=0 type=Xid",
		"2026-11-30T19:08:17.623Z gpu=0 source=nvml",
		`2026-11-30T19:08:17.623Z gpu=0 type=Xid name="unterminated`,
		`2026-11-30T19:08:17.623Z gpu=0 type=Xid a"b=c`,
		"time=2026-11-30 gpu=0 type=Xid",
		"time=2026-11-30T19:08:17.623Z gpu=0 source=nvml",
		"gpu=0 type=Xid",
		"time=2026-11-30T19:08:17.623Z gpu=0 type=Xid\ntime=2026-11-30T19:08:17.623Z gpu=1 type=Xid",
	} {
		if e, ok := ParseEventLine(bad); ok {
			t.Errorf("ParseEventLine(%q) = %+v, want not ok", bad, e)
		}
	}
}

// TestEventLineRoundTrip: every line the writer puts down is strict logfmt
// (go-logfmt, what Loki's `| logfmt` and Vector's parse_logfmt read), with
// time= in UTC first, and its parser gives back every field, values with
// spaces, quotes, backslashes and '=' included.
func TestEventLineRoundTrip(t *testing.T) {
	cet := time.FixedZone("CET", 3600)
	e := EventLine{Time: time.Date(2026, 11, 30, 20, 8, 17, 623e6, cet), Host: "gpu node 7", UUID: "GPU-a", GPU: 3,
		Bus: "00000000:4B:00.0", Source: "kmsg", Type: TypeXid,
		Fields: KV("xid", "79", "name", "GPU has fallen off the bus", "text", `NVRM: Xid (PCI:0000:4b:00): 79, pid='<unknown>', "quoted" a\b c=d`,
			"empty", ""),
		Incident: "crash-20261130-200817.623-gpu3", Snapshot: "/var/log/gpu telemetry/crashes/crash-20261130-200817.623-gpu3.log",
		Job: `slurm job 4242 step 0 "train"`}
	line := e.Line()
	if want := `time=2026-11-30T19:08:17.623Z host="gpu node 7" uuid=GPU-a level=critical gpu=3 bus=00000000:4B:00.0 source=kmsg type=Xid xid=79 name="GPU has fallen off the bus" `; !strings.HasPrefix(line, want) {
		t.Errorf("line\n%s\nwant prefix\n%s", line, want)
	}
	if strings.Contains(line, "\n") || strings.Contains(line, "empty") {
		t.Errorf("line has a newline or the empty field: %q", line)
	}
	d := logfmt.NewDecoder(strings.NewReader(line))
	strict := map[string]string{}
	for d.ScanRecord() {
		for d.ScanKeyval() {
			if d.Value() == nil {
				t.Errorf("key %q without a value", d.Key())
			}
			strict[string(d.Key())] = string(d.Value())
		}
	}
	if err := d.Err(); err != nil {
		t.Fatalf("not logfmt: %v: %s", err, line)
	}
	p, ok := ParseEventLine(line)
	if !ok {
		t.Fatalf("ParseEventLine(%s) failed", line)
	}
	if !p.Time.Equal(e.Time) {
		t.Errorf("time %v, want %v", p.Time, e.Time)
	}
	want := map[string]string{"host": e.Host, "uuid": e.UUID, "level": "critical", "gpu": "3", "bus": e.Bus, "source": "kmsg",
		"type": "Xid", "xid": "79", "name": "GPU has fallen off the bus", "text": e.Fields[2].Value,
		"incident": e.Incident, "snapshot": e.Snapshot, "job": e.Job}
	for k, v := range want {
		if p.KV[k] != v || strict[k] != v {
			t.Errorf("%s: parsed %q, go-logfmt %q, want %q", k, p.KV[k], strict[k], v)
		}
	}
	if len(p.KV) != len(want) || strict["time"] != "2026-11-30T19:08:17.623Z" {
		t.Errorf("fields %v, want %v and time", p.KV, want)
	}
	if p.Class() != e.Class() {
		t.Errorf("class %d parsed, %d written", p.Class(), e.Class())
	}
}

// TestEventLevel: level= is the line's severity, from its class; an
// application's Xid is a warning, not a page.
func TestEventLevel(t *testing.T) {
	for _, c := range []struct {
		e    EventLine
		want string
	}{
		{EventLine{Type: TypeXid, Fields: KV("xid", "79")}, "critical"},
		{EventLine{Type: TypeXid, Fields: KV("xid", "13", "class", "application error")}, "warning"},
		{EventLine{Type: TypeXid, Source: "kmsg", Fields: KV("xid", "79", "duplicate_of", "nvml")}, "warning"},
		{EventLine{Type: TypeTDPChange}, "warning"},
		{EventLine{Type: TypePState}, "info"},
		{EventLine{Type: "0x40"}, "info"},
	} {
		if got := c.e.Level(); got != c.want {
			t.Errorf("%+v: level %s, want %s", c.e, got, c.want)
		}
	}
	if got := (&EventLine{GPU: -1, Type: TypeUncleanStop}).Line(); !strings.Contains(got, " gpu=? type=UNCLEAN_STOP") {
		t.Errorf("a line of no GPU: %s", got)
	}
}

// TestParseOlderEventLines: events.log files an older version left on disk
// (a bare local timestamp first, no time=) still parse, as `report` on an
// old log directory and the boot log read them.
func TestParseOlderEventLines(t *testing.T) {
	for _, c := range []struct {
		name, line string
		want       map[string]string
	}{
		{"with host and level", `2026-11-30T20:08:17.623+01:00 host=testhost uuid=GPU-b level=critical gpu=1 source=kmsg type=Xid xid=46 name="GPU stopped processing" ktime=3201.002000 text="NVRM: Xid (PCI:0000:02:00): 46, pid='<unknown>', name=<unknown>, \"x\""`,
			map[string]string{"host": "testhost", "uuid": "GPU-b", "level": "critical", "gpu": "1", "source": "kmsg", "type": "Xid", "xid": "46",
				"name": "GPU stopped processing", "ktime": "3201.002000", "text": `NVRM: Xid (PCI:0000:02:00): 46, pid='<unknown>', name=<unknown>, "x"`}},
		{"before host", `2026-11-30T20:08:17.623+01:00 gpu=0 bus=00000000:01:00.0 type=TDP_CHANGE from=600W to=450W delta=-150W`,
			map[string]string{"gpu": "0", "bus": "00000000:01:00.0", "type": "TDP_CHANGE", "from": "600W", "to": "450W", "delta": "-150W"}},
		// The kernel's \xNN bytes, undone by kmsg, written by strconv.Quote:
		// Go escapes that go-logfmt refuses (\x, \a, \v, \U).
		{"control and invalid bytes", `2026-11-30T20:08:17.623+01:00 host=h gpu=0 source=kmsg type=Xid xid=13 ktime=1.000000 text="NVRM: Xid (PCI:0000:01:00): 13, \x1b[1m\x7f \a\v \xff\xfe \U0001f600"`,
			map[string]string{"host": "h", "gpu": "0", "source": "kmsg", "type": "Xid", "xid": "13", "ktime": "1.000000",
				"text": "NVRM: Xid (PCI:0000:01:00): 13, \x1b[1m\x7f \a\v \xff\xfe \U0001f600"}},
		{"an escaped quote and backslash", `2026-11-30T20:08:17.623+01:00 gpu=0 type=Xid xid=13 text="a \"b\" c\\d\te"`,
			map[string]string{"gpu": "0", "type": "Xid", "xid": "13", "text": "a \"b\" c\\d\te"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, ok := ParseEventLine(c.line)
			if !ok {
				t.Fatal("did not parse")
			}
			if !e.Time.Equal(time.Date(2026, 11, 30, 19, 8, 17, 623e6, time.UTC)) {
				t.Errorf("time %v", e.Time)
			}
			if !maps.Equal(e.KV, c.want) {
				t.Errorf("fields %v, want %v", e.KV, c.want)
			}
		})
	}
}
