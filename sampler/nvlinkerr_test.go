package sampler

import (
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sampler/fakenvml"
)

// h100Dev is a GPU with 18 NVLink links and no NVLink5 counters: its
// links' errors are behind nvmlDeviceGetNvLinkErrorCounter.
func h100Dev() *fakenvml.Dev {
	d := healthDev()
	d.Fields[nvml.FI_DEV_NVLINK_LINK_COUNT] = 18
	d.LinkFields = map[[2]uint32]uint64{}
	d.DL = map[[2]int]uint64{}
	for l := range 18 {
		d.LinkFields[[2]uint32{nvml.FI_DEV_NVLINK_GET_STATE, uint32(l)}] = 1
		for _, c := range dlCounter {
			d.DL[[2]int{l, int(c.c)}] = 0
		}
	}
	d.DL[[2]int{2, int(nvml.NVLINK_ERROR_DL_CRC_FLIT)}] = 9
	d.DL[[2]int{5, int(nvml.NVLINK_ERROR_DL_RECOVERY)}] = 1
	return d
}

// The first slow sample reads every link (the sums start whole), later
// ones dlLinksPerRead links each, round-robin; the values fill the per-link
// counters and the GPU sums.
func TestNVLinkErrorCountersRoundRobin(t *testing.T) {
	d := h100Dev()
	h := openFakeConfig(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}}, Config{Reprobe: time.Hour, SlowEvery: 1, FieldWait: time.Millisecond})
	g := h.GPUs[0]
	var s reading.Sample
	g.Sample(&s)
	if n := d.Count("GetNvLinkErrorCounter"); n != 18*len(dlCounter) {
		t.Errorf("first read: %d calls, want every link's (%d)", n, 18*len(dlCounter))
	}
	for id, want := range map[reading.ID]uint64{reading.HNVLinkErrors: 9, reading.HNVLinkRecovery: 1, reading.HNVLinkUp: 18} {
		if v := s.Values[id]; v != reading.Some(want) {
			t.Errorf("%s = %+v, want %d", reading.Table[id].Name, v, want)
		}
	}
	l := g.NVLinks()
	if v := l.L[2].C[reading.LDLCRCFlit]; v != reading.Some[uint64](9) {
		t.Errorf("link 2 dl_crc_flit %+v", v)
	}
	if v := l.L[7].C[reading.LDLReplay]; v != reading.Some[uint64](0) {
		t.Errorf("link 7 dl_replay %+v, want a real 0", v)
	}
	if v := l.L[7].C[reading.LRxErrors]; v.OK {
		t.Errorf("an NVLink5 counter on a GPU without them: %+v", v)
	}
	// Later samples: dlLinksPerRead links each; every link within a round.
	d.Update(func(d *fakenvml.Dev) { d.DL[[2]int{17, int(nvml.NVLINK_ERROR_DL_REPLAY)}] = 4 })
	before := d.Count("GetNvLinkErrorCounter")
	rounds := 18 / dlLinksPerRead
	for range rounds {
		g.Sample(&s)
	}
	if n := d.Count("GetNvLinkErrorCounter") - before; n != rounds*dlLinksPerRead*len(dlCounter) {
		t.Errorf("%d samples: %d calls, want %d", rounds, n, rounds*dlLinksPerRead*len(dlCounter))
	}
	if v := g.NVLinks().L[17].C[reading.LDLReplay]; v != reading.Some[uint64](4) {
		t.Errorf("link 17 after a round: %+v, want 4", v)
	}
	if v := s.Values[reading.HNVLinkErrors]; v != reading.Some[uint64](13) {
		t.Errorf("nvlink_errors after a round %+v, want 13", v)
	}
}

// A GPU with NVLink5 counters never calls the old getter; a refused
// counter is not asked again before Reprobe; a driver without the symbol
// is never called.
func TestNVLinkErrorCountersOnlyWithoutNVLink5(t *testing.T) {
	d := h100Dev()
	for l := range 18 {
		d.LinkFields[[2]uint32{nvml.FI_DEV_NVLINK_COUNT_RCV_ERRORS, uint32(l)}] = 0
	}
	s := sampled(t, d, 2)
	if n := d.Count("GetNvLinkErrorCounter"); n != 0 {
		t.Errorf("NVLink5 GPU: %d old-getter calls", n)
	}

	d2 := h100Dev()
	delete(d2.DL, [2]int{3, int(nvml.NVLINK_ERROR_DL_CRC_DATA)}) // not supported on link 3
	h2 := openFakeConfig(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d2}}, Config{Reprobe: time.Hour, SlowEvery: 1, FieldWait: time.Millisecond})
	g := h2.GPUs[0]
	for range 18/dlLinksPerRead + 1 {
		g.Sample(&s)
	}
	want := 18*len(dlCounter) + (18/dlLinksPerRead+0)*dlLinksPerRead*len(dlCounter) - 1
	if n := d2.Count("GetNvLinkErrorCounter"); n != want {
		t.Errorf("calls %d, want %d (the refused counter asked once)", n, want)
	}
	if v := g.NVLinks().L[3].C[reading.LDLCRCData]; v.OK {
		t.Errorf("refused counter present: %+v", v)
	}
	// A new handle (the driver reloaded) asks it again, with every link.
	d2.Update(func(d *fakenvml.Dev) { d.DL[[2]int{3, int(nvml.NVLINK_ERROR_DL_CRC_DATA)}] = 2 })
	g.resetHealth()
	g.Sample(&s)
	if v := g.NVLinks().L[3].C[reading.LDLCRCData]; v != reading.Some[uint64](2) {
		t.Errorf("after a new handle: link 3 dl_crc_data %+v, want 2", v)
	}

	d3 := h100Dev()
	h3 := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d3}, Missing: map[string]bool{"nvmlDeviceGetNvLinkErrorCounter": true}})
	h3.GPUs[0].Sample(&s)
	if n := d3.Count("GetNvLinkErrorCounter"); n != 0 {
		t.Errorf("a driver without the symbol was called %d times", n)
	}
	if v := s.Values[reading.HNVLinkErrors]; v.OK {
		t.Errorf("nvlink_errors without any error counter: %+v, want absent", v)
	}
}
