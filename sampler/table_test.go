package sampler

import (
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// TestTableIsRead checks reading.Table against the sampler: every reading a
// call gives is a row of the table, every row that names a getter is read by
// a call of that function (a field reading: its fallback), and no two rows
// share a name, a field or a CSV column.
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
	for c, cd := range callFn {
		for _, name := range cd.reads {
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
}
