package fanguard

import (
	"strings"
	"testing"
)

func TestParseCurve(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     Curve
		err      string
	}{
		{"default", "60:40,85:100", Curve{{60, 40}, {85, 100}}, ""},
		{"spaces and units", " 50C:30% , 70:60,90:100 ", Curve{{50, 30}, {70, 60}, {90, 100}}, ""},
		{"one point: a fixed speed", "60:80", Curve{{60, 80}}, ""},
		{"empty", "", nil, "want TEMP:PERCENT"},
		{"no colon", "60-40", nil, "want TEMP:PERCENT"},
		{"not a number", "60:fast", nil, "whole numbers"},
		{"fraction", "60.5:40", nil, "whole numbers"},
		{"too cold", "10:40,85:100", nil, "between 20 and 120"},
		{"too hot", "60:40,130:100", nil, "between 20 and 120"},
		{"over 100 %", "60:40,85:101", nil, "between 0 and 100"},
		{"negative speed", "60:-1,85:100", nil, "between 0 and 100"},
		{"temperatures not rising", "60:40,60:100", nil, "must rise"},
		{"temperatures falling", "85:40,60:100", nil, "must rise"},
		{"speed falling", "60:80,85:40", nil, "must not fall"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseCurve(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseCurve(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.err)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error is more than one line: %q", err)
				}
				return
			}
			if err != nil || got.String() != tc.want.String() {
				t.Fatalf("ParseCurve(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestCurveAt(t *testing.T) {
	c := DefaultCurve
	for _, tc := range []struct{ temp, want int }{
		{0, 40}, {59, 40}, {60, 40},
		{61, 43}, // 40 + 60/25 = 42.4: rounded up
		{70, 64}, // 40 + 24
		{73, 72}, // 40 + 31.2
		{84, 98}, // 40 + 57.6
		{85, 100}, {95, 100},
	} {
		if got := c.At(tc.temp); got != tc.want {
			t.Errorf("At(%d) = %d, want %d", tc.temp, got, tc.want)
		}
	}
	three := Curve{{50, 30}, {70, 60}, {90, 100}}
	for _, tc := range []struct{ temp, want int }{{40, 30}, {60, 45}, {70, 60}, {80, 80}, {100, 100}} {
		if got := three.At(tc.temp); got != tc.want {
			t.Errorf("three points: At(%d) = %d, want %d", tc.temp, got, tc.want)
		}
	}
}

// Every curve ParseCurve accepts gives speeds between its ends that never
// fall as the temperature rises.
func FuzzParseCurve(f *testing.F) {
	f.Add("60:40,85:100")
	f.Add("20:0,120:100")
	f.Add("50:30,70:60,90:100")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCurve(s)
		if err != nil {
			return
		}
		prev := -1
		for temp := 0; temp <= 130; temp++ {
			v := c.At(temp)
			if v < prev || v < c[0].Pct || v > c[len(c)-1].Pct {
				t.Fatalf("%s: At(%d) = %d after %d", c, temp, v, prev)
			}
			prev = v
		}
	})
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		err  string
	}{
		{"defaults", func(*Config) {}, ""},
		{"engage too low", func(c *Config) { c.EngageC = 19 }, "--fan-guard-engage 19"},
		{"real-gpu-check.sh's low engage", func(c *Config) { c.EngageC, c.ReleaseC = 30, 25 }, ""},
		{"engage too high", func(c *Config) { c.EngageC = 101 }, "--fan-guard-engage 101"},
		{"release at engage", func(c *Config) { c.ReleaseC = 70 }, "--fan-guard-release 70: must be at least 15 and below --fan-guard-engage (70 C)"},
		{"release too low", func(c *Config) { c.ReleaseC = 10 }, "--fan-guard-release 10"},
		{"bad curve", func(c *Config) { c.Curve = Curve{{60, 80}, {85, 40}} }, "--fan-guard-curve 60:80,85:40"},
		{"no deadline", func(c *Config) { c.CallDeadline = 0 }, "call deadline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			err := c.Validate()
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("Validate() = %v, want %q", err, tc.err)
			}
		})
	}
}
