package sampler

import (
	"slices"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// TestTableIsRead checks reading.Table and reading.FanTable against the
// sampler's calls built from them: every row that names a getter is read
// first by a call of that function (a field reading: its fallback; a
// per-fan reading: for every fan), and no two rows share a name, a field
// or a CSV column. A hardware health counter is read on the slow tier by
// the health call (its field), by its getter, or derived from the per-link
// readings.
func TestTableIsRead(t *testing.T) {
	names := map[string]bool{}
	fields := map[uint32]string{}
	csv := map[string]string{}
	for i := range reading.Table {
		d := &reading.Table[i]
		if d.ID() != reading.ID(i) {
			t.Errorf("row %d (%s) has ID %d", i, d.Name, d.ID())
		}
		if names[d.Name] {
			t.Errorf("two rows named %s", d.Name)
		}
		names[d.Name] = true
		if d.Field != 0 {
			if o, ok := fields[d.Field]; ok {
				t.Errorf("%s and %s both read field %d", o, d.Name, d.Field)
			}
			fields[d.Field] = d.Name
		}
		if d.CSV != "" {
			if o, ok := csv[d.CSV]; ok {
				t.Errorf("%s and %s both write column %s", o, d.Name, d.CSV)
			}
			csv[d.CSV] = d.Name
		}
	}
	read := map[*reading.Def][]call{}
	for _, gr := range getterReadings {
		read[gr.def] = gr.calls
	}
	for _, fr := range fieldReadings {
		if fr.call != cFields {
			read[fr.def] = []call{fr.call}
		}
	}
	for i := range reading.Table {
		d := &reading.Table[i]
		if d.Getter == "" {
			continue
		}
		calls := read[d]
		if len(calls) == 0 {
			t.Errorf("%s names getter %s, but no call reads it", d.Name, d.Getter)
			continue
		}
		if got := callFn[calls[0]].fn.String(); got != d.Getter {
			t.Errorf("%s names getter %s, but is read by %s", d.Name, d.Getter, got)
		}
	}
	for _, fr := range fanReadings {
		for fan, calls := range fr.calls {
			if len(calls) == 0 || callFn[calls[0]].idx != fan {
				t.Errorf("%s of fan %d: no call of that fan reads it", fr.def.Name, fan)
				continue
			}
			if got := callFn[calls[0]].fn.String(); got != fr.def.Getter {
				t.Errorf("%s of fan %d names getter %s, but is read first by %s", fr.def.Name, fan, fr.def.Getter, got)
			}
		}
	}
	for _, id := range reading.HealthIDs {
		d := &reading.Table[id]
		if d.Tier != reading.Slow {
			t.Errorf("health counter %s: tier %d, want the slow tier", d.Name, d.Tier)
		}
		derived := slices.Contains(derivedHealth, id)
		switch {
		case d.Field != 0 && d.Call != reading.HealthCall:
			t.Errorf("health counter %s: field %d read in the sample's call, not the health call", d.Name, d.Field)
		case d.Field == 0 && d.Getter == "" && !derived:
			t.Errorf("health counter %s: no field, no getter and not derived: never read", d.Name)
		case derived && (d.Field != 0 || d.Getter != ""):
			t.Errorf("health counter %s: derived, but also read", d.Name)
		}
	}
}

// TestCallsFitTheBatch: the check every call of a sample passes (callDef.fits,
// at init) refuses what would overrun: an f(dev, out, out2) call whose
// struct is wider than the half of the buffer it is given, a value past
// its struct's end.
func TestCallsFitTheBatch(t *testing.T) {
	enc := callFn[getterReadings[slices.IndexFunc(getterReadings, func(g getterReading) bool { return g.def.ID() == reading.EncUtil })].calls[0]]
	wide := enc
	wide.cc.size = maxOut/2 + 4
	if wide.fits() == nil {
		t.Errorf("an out/out call filling %d bytes fits; batch.c gives its first struct %d", wide.cc.size, maxOut/2)
	}
	wide.cc.shape = reading.ShapeOut
	if err := wide.fits(); err != nil {
		t.Errorf("a one-struct call of %d bytes: %v", wide.cc.size, err)
	}
	past := enc
	past.cc.vals = []cVal{{off: past.cc.size - 2, size: 4}}
	if past.fits() == nil {
		t.Error("a value reaching past its struct fits")
	}

	// A part of a field ("Field+N", the reading's type wide) is inside it.
	fabric := "nvmlDeviceGetGpuFabricInfo_v4"
	if v := getterCall(fabric, reading.ShapeOut, 0, "ClusterUuid+8", reading.U64).cc.vals[0]; v != (cVal{off: 8, size: 8}) {
		t.Errorf("ClusterUuid+8: %+v, want bytes 8-15", v)
	}
	for _, value := range []string{"ClusterUuid+12", "ClusterUuid+x", "Status+4"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s of %s: a value outside its field accepted", value, fabric)
				}
			}()
			getterCall(fabric, reading.ShapeOut, 0, value, reading.U64)
		}()
	}
}
