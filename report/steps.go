package report

import (
	"strconv"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// stepRunGap: steps of one counter closer than this are one climb. The
// health counters are read once a second (up to 16 s apart when the pacer
// stretches the slow tier); a pause of two minutes ends a climb.
const stepRunGap = 2 * time.Minute

// climb is a run of HEALTH lines of one counter (on one link) of one GPU,
// each a growth (delta=+N), on one side of the incident: the timeline gives
// it one line ("+60 over 19.0s"), not one per step, and a climb of an error
// counter before the incident is a precursor.
type climb struct {
	gpu           int
	counter, link string
	first, last   EventLine
	steps         int
	sum           uint64
	sig           string   // the steps' times and deltas: counters that move together have the same
	alike         []string // other counters whose steps were the same (ecc_sbe_aggregate with ecc_sbe_volatile)
}

// counterStep reports whether e is a counter's growth, and by how much.
func counterStep(e EventLine) (uint64, bool) {
	if e.Type != sink.TypeHealth || !strings.HasPrefix(e.KV["delta"], "+") {
		return 0, false
	}
	d, err := strconv.ParseUint(e.KV["delta"][1:], 10, 64)
	return d, err == nil
}

// climbs gathers counter steps (time ordered) into climbs, splitting at
// split (the incident: a step at its moment is of the climb after it). Counters that climbed step for step (volatile and
// aggregate) are one climb.
func climbs(steps []EventLine, split time.Time) []*climb {
	type key struct {
		gpu           int
		counter, link string
		after         bool
	}
	open := map[key]*climb{}
	var cs []*climb
	for _, e := range steps {
		d, ok := counterStep(e)
		if !ok {
			continue
		}
		k := key{e.GPU, e.KV["counter"], e.KV["link"], !e.Time.Before(split)}
		c := open[k]
		if c == nil || e.Time.Sub(c.last.Time) > stepRunGap {
			c = &climb{gpu: e.GPU, counter: k.counter, link: k.link, first: e}
			open[k] = c
			cs = append(cs, c)
		}
		c.last, c.steps, c.sum = e, c.steps+1, c.sum+d
		c.sig += e.Time.Format(time.RFC3339Nano) + "+" + strconv.FormatUint(d, 10) + " "
	}
	var out []*climb
next:
	for _, c := range cs {
		for _, o := range out {
			if c.steps > 1 && o.gpu == c.gpu && o.link == c.link && o.sig == c.sig {
				o.alike = append(o.alike, c.counter)
				continue next
			}
		}
		out = append(out, c)
	}
	return out
}

// summary says what the counter did: "ecc_sbe_volatile +60 over 19.0s (0
// -> 60 in 20 steps; ecc_sbe_aggregate alike)", or for one step
// "remap_correctable +1 (0 -> 1)".
func (c *climb) summary() string {
	s := c.counter
	if c.link != "" {
		s += " link " + c.link
	}
	s += " +" + strconv.FormatUint(c.sum, 10)
	if c.steps == 1 {
		return s + " (" + c.first.KV["from"] + " -> " + c.last.KV["to"] + ")"
	}
	s += " over " + fmtDur(c.last.Time.Sub(c.first.Time)) +
		" (" + c.first.KV["from"] + " -> " + c.last.KV["to"] + " in " + strconv.Itoa(c.steps) + " steps"
	if len(c.alike) > 0 {
		s += "; " + strings.Join(c.alike, ", ") + " alike"
	}
	return s + ")"
}

// errorCounter reports whether name is a GPU-level health counter of errors
// (a count: ECC, remaps, retired pages, PCIe errors), whose growth before an
// incident is a precursor. Clock-event times and per-link counters grow on
// healthy GPUs too.
func errorCounter(name string) bool {
	for _, id := range reading.HealthIDs {
		d := &reading.Table[id]
		if d.Name == name {
			return d.Kind == reading.HealthCount
		}
	}
	return false
}
