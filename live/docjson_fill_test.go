package live_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	. "github.com/gpu-telemetry/gpu-telemetry/live"
)

// fill sets every field reachable from v to a value that is not its zero
// value (pointers allocated, slices and maps with one element), so that no
// field is left out for being empty; pointer chains stop at depth 8 (a
// process read's last good read points to another read).
func fill(v reflect.Value, depth int) {
	if v.Type() == reflect.TypeFor[time.Time]() {
		v.Set(reflect.ValueOf(time.Date(2026, 11, 30, 15, 4, 5, 6e8, time.UTC)))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), depth)
			}
		}
	case reflect.Pointer:
		if depth < 8 {
			v.Set(reflect.New(v.Type().Elem()))
			fill(v.Elem(), depth+1)
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), depth)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, depth)
		fill(e, depth)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString("s<&>\"")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(9)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.25)
	}
}

// jsonKeys lists the json keys of every field of t and of the types it
// holds, recursively.
func jsonKeys(t reflect.Type, seen map[reflect.Type]bool, keys map[string]string) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] || t == reflect.TypeFor[time.Time]() {
		return
	}
	seen[t] = true
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		keys[name] = t.Name() + "." + f.Name
		jsonKeys(f.Type, seen, keys)
	}
}

// TestAppendJSONWritesEveryField: a document with every field filled, down
// to the processes' last good read, encodes to what encoding/json writes,
// and every json key of Doc and the types it holds appears in it, so a field
// added to Doc (omitempty or not) and left out of AppendJSON fails here
// whatever the other tests' documents fill.
func TestAppendJSONWritesEveryField(t *testing.T) {
	var d Doc
	fill(reflect.ValueOf(&d).Elem(), 0)
	got := d.AppendJSON(nil)
	want, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Errorf("differs at byte %d:\n got  %s\n want %s", i, got[max(i-80, 0):min(i+80, len(got))], want[max(i-80, 0):min(i+80, len(want))])
	}
	keys := map[string]string{}
	jsonKeys(reflect.TypeFor[Doc](), map[reflect.Type]bool{}, keys)
	if len(keys) < 50 {
		t.Fatalf("found %d json keys in Doc; the walk is broken", len(keys))
	}
	for k, field := range keys {
		if !bytes.Contains(got, []byte(`"`+k+`":`)) {
			t.Errorf("AppendJSON does not write %q (%s)", k, field)
		}
	}
}
