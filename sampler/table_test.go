package sampler

import (
	"slices"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// TestTableIsRead checks reading.Table and reading.FanTable against the
// sampler: every reading a call gives is a row of a table, every row that
// names a getter is read by a call of that function (a field reading: its
// fallback; a per-fan reading: for every fan, first), and no two rows
// share a name, a field or a CSV column. A hardware health counter is read
// on the slow tier by the health call (its field), by its getter, or derived
// from the per-link readings.
func TestTableIsRead(t *testing.T) {
	rows := map[string]*reading.Def{}
	fields := map[uint32]string{}
	csv := map[string]string{}
	for i := range reading.Table {
		d := &reading.Table[i]
		if rows[d.Name] != nil {
			t.Errorf("two rows named %s", d.Name)
		}
		rows[d.Name] = d
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
	fans := map[string]*reading.FanDef{}
	for i := range reading.FanTable {
		d := &reading.FanTable[i]
		if fans["fan."+d.Name] != nil {
			t.Errorf("two per-fan rows named %s", d.Name)
		}
		fans["fan."+d.Name] = d
	}
	for c, cd := range callFn {
		for _, name := range cd.reads {
			if fans[name] != nil {
				if cd.idx >= reading.MaxFans {
					t.Errorf("call %d (%s) gives %s of fan %d, past MaxFans", c, cd.fn, name, cd.idx)
				}
				continue
			}
			d := rows[name]
			if d == nil {
				t.Errorf("call %d (%s) gives %s, which is not in reading.Table", c, cd.fn, name)
				continue
			}
			if d.Field != 0 {
				t.Errorf("call %d (%s) gives %s, a field reading (its fallback is its Getter)", c, cd.fn, name)
			}
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
		if got := fnInfo[callFn[calls[0]].fn].name; got != d.Getter {
			t.Errorf("%s names getter %s, but is read by %s", d.Name, d.Getter, got)
		}
	}
	for _, fr := range fanReadings {
		for fan, calls := range fr.calls {
			if len(calls) == 0 {
				t.Errorf("%s of fan %d: no call reads it", fr.def.Name, fan)
				continue
			}
			if got := fnInfo[callFn[calls[0]].fn].name; got != fr.def.Getter {
				t.Errorf("%s of fan %d names getter %s, but is read first by %s", fr.def.Name, fan, fr.def.Getter, got)
			}
		}
	}
	for id, d := range reading.Health {
		if got, ok := d.Health(); !ok || int(got) != id {
			t.Errorf("health counter %d is row %s, whose id is %d (%v)", id, d.Name, got, ok)
		}
		if d.Tier != reading.Slow {
			t.Errorf("health counter %s: tier %d, want the slow tier", d.Name, d.Tier)
		}
		derived := slices.Contains(derivedHealth, reading.HealthID(id))
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

// TestCallsFitTheBatch: every call of a sample fits what batch.c holds
// (callDef.fits, which setCalls enforces at the first native batch), and
// the check itself refuses what would overrun: an f(dev, out, out2) call
// whose struct is wider than the half of the buffer it is given, a value
// past its struct's end.
func TestCallsFitTheBatch(t *testing.T) {
	for c := cFields + 1; c < numCalls; c++ {
		if err := callFn[c].fits(); err != nil {
			t.Error(err)
		}
	}
	wide := callFn[cEnc]
	wide.cc.size = maxOut/2 + 4
	if wide.fits() == nil {
		t.Errorf("an out/out call filling %d bytes fits; batch.c gives its first struct %d", wide.cc.size, maxOut/2)
	}
	wide.cc.shape = shapeOut
	if err := wide.fits(); err != nil {
		t.Errorf("a one-struct call of %d bytes: %v", wide.cc.size, err)
	}
	past := callFn[cEnc]
	past.cc.vals = []cVal{{off: past.cc.size - 2, size: 4}}
	if past.fits() == nil {
		t.Error("a value reaching past its struct fits")
	}
}
