package live

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// docDefs are the rows of reading.Table that GPUDoc.Readings holds, in the
// table's order: those with a Key, but for the hardware health counters
// (HealthDoc.Counters). docIndex is their index by Key.
var docDefs, docIndex = func() ([]*reading.Def, map[string]int) {
	var defs []*reading.Def
	idx := map[string]int{}
	for i := range reading.Table {
		d := &reading.Table[i]
		if d.Key != "" && !d.IsHealth() {
			idx[d.Key] = len(defs)
			defs = append(defs, d)
		}
	}
	return defs, idx
}()

// Value is one reading in the status document, in the form its row
// declares (reading.Def.Doc): a number, or a clocks event mask's names.
type Value struct {
	v any // nil when absent, else what docValue gives
}

// docValue is stored value u of row d as the document gives it; its type
// is the row's field's in gpuWire (nil pointers and slices are null).
func docValue(d *reading.Def, u uint64) any {
	n := float64(u)
	if d.Signed() {
		n = float64(int64(u))
	}
	switch {
	case d.Doc == reading.DocReasons:
		names := []string{}
		for _, r := range reading.ThrottleReasons {
			if u&r.Bit != 0 {
				names = append(names, r.Name)
			}
		}
		return names
	case d.Doc == reading.DocMilli:
		n /= 1000
		return &n
	case d.Signed():
		v := int64(u)
		return &v
	}
	return &u
}

// readings are s's values of docDefs.
func readings(s *reading.Sample) []Value {
	out := make([]Value, len(docDefs))
	for i, d := range docDefs {
		if u, ok := d.Get(s); ok {
			out[i].v = docValue(d, u)
		}
	}
	return out
}

// Reading is the GPU's reading whose Key is key, absent when the document
// has none. A key that is not one of Readings panics, naming the key: a
// view's misspelt key fails its golden test instead of showing n/a for
// ever.
func (g *GPUDoc) Reading(key string) Value {
	i, ok := docIndex[key]
	if !ok {
		for _, id := range reading.HealthIDs {
			if reading.Table[id].Key == key {
				panic("live: GPUDoc.Reading(" + strconv.Quote(key) + "): a hardware health counter's key; it is in GPUDoc.Health.Counters")
			}
		}
		panic("live: GPUDoc.Reading(" + strconv.Quote(key) + "): no row of reading.Table has this Key (GPUDoc.Readings holds the rows with a Key, but the health counters)")
	}
	if i < len(g.Readings) {
		return g.Readings[i]
	}
	return Value{}
}

// stored is the stored value of row d that v stands for, as Def.Get gives
// it; ok is false when none does: a DocMilli number beyond 64 bits, or
// below 0 for an unsigned row (a clocks event mask's names: 0, true).
func (v Value) stored(d *reading.Def) (u uint64, ok bool) {
	switch x := v.v.(type) {
	case *uint64:
		return *x, true
	case *int64:
		return uint64(*x), true
	case *float64:
		m := math.Round(*x * 1000)
		if d.Signed() {
			return uint64(int64(m)), m >= -(1<<63) && m < 1<<63
		}
		return uint64(m), m >= 0 && m < 1<<64
	}
	return 0, true
}

// Num is the reading as a number; ok is false when it is absent or not a
// number.
func (v Value) Num() (n float64, ok bool) {
	switch x := v.v.(type) {
	case *uint64:
		return float64(*x), true
	case *int64:
		return float64(*x), true
	case *float64:
		return *x, true
	}
	return 0, false
}

// Names is a clocks event mask's reasons ([] for none); nil when absent.
func (v Value) Names() []string {
	n, _ := v.v.([]string)
	return n
}

// Format is the number with prec decimals (-1: as few as it takes)
// followed by unit, or n/a when absent.
func (v Value) Format(prec int, unit string) string {
	if n, ok := v.Num(); ok {
		return strconv.FormatFloat(n, 'f', prec, 64) + unit
	}
	return na
}

// Text is the number as it is followed by unit, or n/a when absent.
func (v Value) Text(unit string) string { return v.Format(-1, unit) }

// gpuWire is GPUDoc as encoding/json reads and writes it: GPUDoc's fields
// with one field per docDefs row, tagged with its key, in place of
// Readings (built once with reflect.StructOf, so that a row added to the
// table is a key of the document with no edit here). fields maps GPUDoc's
// other fields to t's; the readings are t's fields from at.
var gpuWire = func() (w struct {
	t      reflect.Type
	fields [][2]int
	at     int
}) {
	gt := reflect.TypeFor[GPUDoc]()
	var fs []reflect.StructField
	for i := range gt.NumField() {
		f := gt.Field(i)
		if f.Name != "Readings" {
			w.fields = append(w.fields, [2]int{i, len(fs)})
			fs = append(fs, f)
			continue
		}
		w.at = len(fs)
		for j, d := range docDefs {
			fs = append(fs, reflect.StructField{Name: "R" + strconv.Itoa(j), Type: reflect.TypeOf(docValue(d, 0)), Tag: reflect.StructTag(`json:"` + d.Key + `"`)})
		}
	}
	w.t = reflect.StructOf(fs)
	return w
}()

// wire is g as a gpuWire.t (addressable).
func (g *GPUDoc) wire() reflect.Value {
	w := reflect.New(gpuWire.t).Elem()
	src := reflect.ValueOf(g).Elem()
	for _, f := range gpuWire.fields {
		w.Field(f[1]).Set(src.Field(f[0]))
	}
	for j := range min(len(g.Readings), len(docDefs)) {
		if v := g.Readings[j].v; v != nil {
			w.Field(gpuWire.at + j).Set(reflect.ValueOf(v))
		}
	}
	return w
}

// MarshalJSON encodes the GPU with encoding/json, its readings at its level
// under their keys.
func (g GPUDoc) MarshalJSON() ([]byte, error) { return json.Marshal(g.wire().Interface()) }

// UnmarshalJSON decodes what MarshalJSON encodes. A reading whose value its
// row's storage cannot hold (4294967296 for a 32-bit reading) is an error,
// never cut to fit.
func (g *GPUDoc) UnmarshalJSON(b []byte) error {
	w := g.wire()
	if err := json.Unmarshal(b, w.Addr().Interface()); err != nil {
		return err
	}
	dst := reflect.ValueOf(g).Elem()
	for _, f := range gpuWire.fields {
		dst.Field(f[0]).Set(w.Field(f[1]))
	}
	rs := make([]Value, len(docDefs))
	for j, d := range docDefs {
		f := w.Field(gpuWire.at + j)
		if f.IsNil() {
			continue
		}
		rs[j].v = f.Interface()
		if u, ok := rs[j].stored(d); !ok || !d.Fits(u) {
			js, _ := json.Marshal(f.Interface())
			return fmt.Errorf("status document: %s %s: out of the range reading %s can hold", d.Key, js, d.Name)
		}
	}
	g.Readings = rs
	return nil
}

// Lookup is the GPU's reading whose Key is key, like Reading, but for a key
// this build's table may lack (a reading a newer daemon adds): ok is false
// for such a key, and the value is absent. Views that show a reading only
// when the daemon gives it use Lookup; the rest use Reading, which panics on
// a misspelt key.
func (g *GPUDoc) Lookup(key string) (v Value, ok bool) {
	i, ok := docIndex[key]
	if !ok {
		return Value{}, false
	}
	if i < len(g.Readings) {
		return g.Readings[i], true
	}
	return Value{}, true
}
