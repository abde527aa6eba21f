package anomaly

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// t0 is an arbitrary start time for tests; time only ever arrives as a value.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// tick is the poll interval.
const tick = 100 * time.Millisecond

// absent32 and absent64 are absent readings.
var (
	absent32 reading.Opt[uint32]
	absent64 reading.Opt[uint64]
)

// pct returns a present percentage or temperature.
func pct(v uint32) reading.Opt[uint32] { return reading.Some(v) }

// mw returns a present power in milliwatts.
func mw(v uint32) reading.Opt[uint32] { return reading.Some(v) }

// watts returns a present power given in whole watts.
func watts(v uint32) reading.Opt[uint32] { return reading.Some(v * 1000) }

// mask returns a present clocks event reasons mask.
func mask(v uint64) reading.Opt[uint64] { return reading.Some(v) }

// mod changes one field of a test sample.
type mod func(*reading.Sample)

// mk returns a good, unremarkable sample: 60 C, 300 W of a 600 W limit, no
// throttling, two fans at 50 %; mods change it.
func mk(mods ...mod) *reading.Sample {
	s := &reading.Sample{
		Status: reading.StatusAnswered,
		Values: reading.Values{reading.TempC: reading.Widen(pct(60)), reading.PowerMW: reading.Widen(watts(300)),
			reading.PowerLimitMW: reading.Widen(watts(600)), reading.Throttle: mask(0)},
	}
	setFans(s, pct(50), pct(50))
	for _, m := range mods {
		m(s)
	}
	return s
}

// setFans sets the fan speeds; none means a fanless GPU.
func setFans(s *reading.Sample, speeds ...reading.Opt[uint32]) {
	s.NumFans = len(speeds)
	s.Fans = [reading.MaxFans]reading.Fan{}
	for i, v := range speeds {
		s.Fans[i] = reading.Fan{Speed: v, Target: v}
	}
}

func fansAt(speeds ...reading.Opt[uint32]) mod {
	return func(s *reading.Sample) { setFans(s, speeds...) }
}
func tempAt(v reading.Opt[uint32]) mod {
	return func(s *reading.Sample) { s.Values[reading.TempC] = reading.Widen(v) }
}
func powerAt(v reading.Opt[uint32]) mod {
	return func(s *reading.Sample) { s.Values[reading.PowerMW] = reading.Widen(v) }
}
func limitAt(v reading.Opt[uint32]) mod {
	return func(s *reading.Sample) { s.Values[reading.PowerLimitMW] = reading.Widen(v) }
}
func throttleAt(v reading.Opt[uint64]) mod {
	return func(s *reading.Sample) { s.Values[reading.Throttle] = v }
}
func status(st reading.Status) mod { return func(s *reading.Sample) { s.Status = st } }

// zeroed is what the Python logger (gpu-telemetry-deep.py) wrote for a lost
// GPU, whose failed reads it turned into zeros: every reading a present zero.
// A sample in a failure status must be ignored even if it looks like this.
func zeroed(s *reading.Sample) {
	s.Values[reading.TempC], s.Values[reading.PowerMW], s.Values[reading.PowerLimitMW] = reading.Widen(pct(0)), reading.Widen(mw(0)), reading.Widen(mw(0))
	s.Values[reading.Throttle] = mask(0)
	setFans(s, pct(0), pct(0))
}

// flagText is the CSV form of the flag detector d's finding f raised, ""
// for none.
func flagText(d *Def, f Finding) string {
	if f.Flag == 0 {
		return ""
	}
	return string(reading.Flag{Kind: d.kinds[f.Flag-1], A: f.A, B: f.B}.AppendText(nil))
}

// The counters and notice kinds the tests look at, by the names the outputs
// give them. TestMain sets them: the detectors register in init funcs,
// which run after every package-level var is initialized.
var (
	CountSpikes, CountPowerBreaches, CountFanInversions, CountSpuriousThrottles, CountTDPChanges, CountThrottleChanges Counter

	NoticeThrottleChange, NoticeTDPChange, NoticeFanInversion, NoticeSpuriousThrottle, NoticePowerOver NoticeKind
)

func TestMain(m *testing.M) {
	CountSpikes = CounterNamed("spikes")
	CountPowerBreaches = CounterNamed("pwr_breaches")
	CountFanInversions = CounterNamed("fan_inversions")
	CountSpuriousThrottles = CounterNamed("spurious_throttles")
	CountTDPChanges = CounterNamed("tdp_changes")
	CountThrottleChanges = CounterNamed("throttle_changes")
	NoticeThrottleChange = kindOf(&throttleChangeDef)
	NoticeTDPChange = kindOf(&tdpChangeDef)
	NoticeFanInversion = kindOf(&fanInversionDef)
	NoticeSpuriousThrottle = kindOf(&spurThrottleDef)
	NoticePowerOver = kindOf(&powerBreachDef)
	os.Exit(m.Run())
}

// kindOf is the notice kind of detector d.
func kindOf(d *Def) NoticeKind { return NoticeKind(slices.Index(Detectors, d) + 1) }

// warmCase is one sample given to a detector that flags only after a
// warm-up of samples seen (fan inversion, spurious throttling).
type warmCase struct {
	name string
	seen int
	cur  *reading.Sample
	want string // flag text; "" for none
}

// checkWarm runs detector d of def over the cases, each a subtest.
func checkWarm(t *testing.T, def *Def, d Detector, cases []warmCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			if got := flagText(def, d.Check(Input{Cur: tt.cur, Seen: tt.seen, Now: t0})); got != tt.want {
				t.Errorf("check = %q, want %q", got, tt.want)
			}
		})
	}
}
