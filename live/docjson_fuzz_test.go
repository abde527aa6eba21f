package live

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
)

// FuzzJStr: the status encoder writes a string as encoding/json does. The
// seeds run as a unit test under `go test`; `go test -fuzz FuzzJStr ./live`
// searches further.
func FuzzJStr(f *testing.F) {
	for _, s := range []string{"", "plain", "quote \" backslash \\ slash /", "<a href='x'>&amp;</a>",
		"\x00\x01\x1f\x7f\b\f\n\r\t", "\u2028\u2029", "\xff\xfe bad \xc3", "\xed\xa0\x80 surrogate",
		"é ü 日本 🚀", "NVIDIA \xff\xfe H100"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := jStr(nil, s); !bytes.Equal(got, want) {
			t.Errorf("jStr(%q) = %s, encoding/json %s", s, got, want)
		}
	})
}

// FuzzJFloat: the status encoder writes a number as encoding/json does, and
// NaN and infinities (which encoding/json refuses) as null.
func FuzzJFloat(f *testing.F) {
	for _, x := range []float64{0, math.Copysign(0, -1), 1, -1.5, 0.1, 1e-6, 9.99e-7, 1e-7, 1e20, 1e21, 123456789.125,
		5e-324, math.MaxFloat64, -math.MaxFloat64, math.NaN(), math.Inf(1), math.Inf(-1)} {
		f.Add(x)
	}
	f.Fuzz(func(t *testing.T, x float64) {
		got := jFloat(nil, x)
		if math.IsNaN(x) || math.IsInf(x, 0) {
			if string(got) != "null" {
				t.Errorf("jFloat(%v) = %s, want null", x, got)
			}
			return
		}
		want, err := json.Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("jFloat(%v) = %s, encoding/json %s", x, got, want)
		}
	})
}
