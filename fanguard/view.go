package fanguard

import (
	"slices"
	"strconv"
	"strings"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// View is what the outputs show of a guard.
type View struct {
	State    string // watching, holding, no fans, refused, hung, GPU lost, starting, stopped, not handed back
	Why      string // why refused or hung; why it holds
	Fans     []int  // held
	Speed    int    // the highest speed commanded
	Firmware reading.Opt[uint32]
	TempC    reading.Opt[uint32]
}

// Holding reports whether the guard holds fans.
func (v View) Holding() bool { return len(v.Fans) > 0 }

// String is the status line's: "holding fans 0,1 at 78 % (firmware wanted 53 %), 73 °C".
func (v View) String() string {
	if !v.Holding() {
		if v.Why != "" {
			return v.State + " (" + v.Why + ")"
		}
		return v.State
	}
	if v.State != "holding" { // "not handed back: fans 0 at 76 % (the driver's reason)"
		s := v.State + ": fans " + fanInts(v.Fans) + " at " + strconv.Itoa(v.Speed) + " %"
		if v.Why != "" {
			s += " (" + v.Why + ")"
		}
		return s
	}
	s := "holding fans " + fanInts(v.Fans) + " at " + strconv.Itoa(v.Speed) + " %"
	if fw, ok := v.Firmware.Get(); ok {
		s += " (firmware wanted " + strconv.FormatUint(uint64(fw), 10) + " %)"
	}
	if t, ok := v.TempC.Get(); ok {
		s += ", " + strconv.FormatUint(uint64(t), 10) + " °C"
	}
	return s
}

// View returns the guard's state; safe from any goroutine, never waits on
// the driver.
func (g *Guard) View() View {
	g.mu.Lock()
	defer g.mu.Unlock()
	v := View{State: phaseNames[g.ph], Why: g.why}
	if g.have.fans > 0 {
		v.State, v.Why, v.Fans = "holding", g.want.why, fanList(g.have.fans)
		v.Speed = slices.Max(g.have.speed[:g.have.fans])
		for _, t := range g.have.target0[:g.have.fans] {
			if t.OK && (!v.Firmware.OK || t.V > v.Firmware.V) {
				v.Firmware = t
			}
		}
		v.TempC = g.have.temp
	}
	if len(g.stranded) > 0 {
		v.State, v.Fans, v.Speed = "not handed back", slices.Clone(g.stranded), g.strandSpd
	}
	return v
}

func fanList(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func fanText(n int) string { return fanInts(fanList(n)) }

func fanInts(fans []int) string {
	s := make([]string, len(fans))
	for i, f := range fans {
		s[i] = strconv.Itoa(f)
	}
	return strings.Join(s, ",")
}

func optText(o reading.Opt[uint32]) string {
	if v, ok := o.Get(); ok {
		return strconv.FormatUint(uint64(v), 10)
	}
	return ""
}
