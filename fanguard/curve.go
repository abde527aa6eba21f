package fanguard

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Point is one point of a fan curve: at TempC the fans run at Pct.
type Point struct{ TempC, Pct int }

// Curve is a fan curve: points in rising temperature, linear in between,
// flat before the first and after the last.
type Curve []Point

// DefaultCurve is 40 % at 60 C rising linearly to 100 % at 85 C: full
// speed at the temperature the inversion detector calls hot
// (InversionTempC), and 78 % about where the measured cure ran (73 C).
var DefaultCurve = Curve{{60, 40}, {85, 100}}

// Bounds of a curve point: below 20 C no GPU needs its fans forced, above
// 120 C every GPU has shut itself down.
const (
	minCurveTempC = 20
	maxCurveTempC = 120
)

// ParseCurve parses "60:40,85:100" (temperature in C : fan speed in %,
// comma-separated) and validates it.
func ParseCurve(s string) (Curve, error) {
	var c Curve
	for p := range strings.SplitSeq(s, ",") {
		t, pct, ok := strings.Cut(strings.TrimSpace(p), ":")
		if !ok {
			return nil, fmt.Errorf("point %q: want TEMP:PERCENT (60:40)", p)
		}
		tc, err1 := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(t), "C"))
		pc, err2 := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(pct), "%"))
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("point %q: want whole numbers TEMP:PERCENT (60:40)", p)
		}
		c = append(c, Point{tc, pc})
	}
	return c, c.Validate()
}

// Validate checks the points: at least one, temperatures between 20 and
// 120 C and rising, speeds between 0 and 100 % and never falling (a curve
// that slows the fans as the die heats is a mistake).
func (c Curve) Validate() error {
	if len(c) == 0 {
		return errors.New("no points: want TEMP:PERCENT[,TEMP:PERCENT...] (60:40,85:100)")
	}
	for i, p := range c {
		if p.TempC < minCurveTempC || p.TempC > maxCurveTempC {
			return fmt.Errorf("point %d:%d: temperature must be between %d and %d C", p.TempC, p.Pct, minCurveTempC, maxCurveTempC)
		}
		if p.Pct < 0 || p.Pct > 100 {
			return fmt.Errorf("point %d:%d: speed must be between 0 and 100 %%", p.TempC, p.Pct)
		}
		if i > 0 && p.TempC <= c[i-1].TempC {
			return fmt.Errorf("point %d:%d: temperatures must rise from point to point", p.TempC, p.Pct)
		}
		if i > 0 && p.Pct < c[i-1].Pct {
			return fmt.Errorf("point %d:%d: speed must not fall as the temperature rises", p.TempC, p.Pct)
		}
	}
	return nil
}

// At returns the curve's speed at tempC in whole percent, rounded up (the
// safe direction).
func (c Curve) At(tempC int) int {
	if len(c) == 0 {
		return 100
	}
	if tempC <= c[0].TempC {
		return c[0].Pct
	}
	for i := 1; i < len(c); i++ {
		a, b := c[i-1], c[i]
		if tempC <= b.TempC {
			num, den := (b.Pct-a.Pct)*(tempC-a.TempC), b.TempC-a.TempC
			return a.Pct + (num+den-1)/den
		}
	}
	return c[len(c)-1].Pct
}

// String is the curve as ParseCurve reads it.
func (c Curve) String() string {
	parts := make([]string, len(c))
	for i, p := range c {
		parts[i] = strconv.Itoa(p.TempC) + ":" + strconv.Itoa(p.Pct)
	}
	return strings.Join(parts, ",")
}
