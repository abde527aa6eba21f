package sampler

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/kclock"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

var (
	// ErrNoDriver means the NVIDIA driver or its libnvidia-ml.so.1 is not there.
	ErrNoDriver = errors.New("no NVIDIA driver")
	// ErrUnknownGPU means a selector (OpenOptions.Select) matches no GPU.
	ErrUnknownGPU = errors.New("unknown GPU")
	// ErrNoGPU means the driver is loaded but reports no GPU.
	ErrNoGPU = errors.New("no NVIDIA GPU")
)

// OpenOptions configure Open.
type OpenOptions struct {
	// Select picks GPUs by index, UUID or PCI bus id; empty means all.
	Select []string
	// Config tunes each GPU's sampler.
	Config Config
	// Timeout bounds each start-up call into the driver (init, count,
	// handles) and each GPU's static facts. Default 20 s.
	Timeout time.Duration
	// Logger receives start-up notes.
	Logger *slog.Logger
	// KernelClock is the kernel log clock the GPUs stamp dmesg_time on;
	// zero: anchored to CLOCK_MONOTONIC at Open (kclock.New).
	KernelClock kclock.Clock
	// Counters is where the host, its GPUs and their process readers count
	// (counters.go); required.
	Counters *counters.Registry

	// startNative starts a GPU's executor (nil: newNativeExec).
	startNative func(*native, int, time.Duration) (*nativeExec, error)
}

// Host is the opened driver with the selected GPUs.
type Host struct {
	lib Library
	// all are every GPU enumerated at start, selected or not:
	// EnumeratedUUIDs.
	all    []*GPU
	Syms   Symbols
	System reading.System
	GPUs   []*GPU
	kclock kclock.Clock
	// Pacer is shared by the GPUs (nil when Config.Interval is 0).
	Pacer *Pacer
	// openEvents, when set (tests), replaces the native event thread.
	openEvents func(masks []uint64) (EventStream, error)
	reg        *counters.Registry // OpenOptions.Counters
	pending    []string           // Pending
	opLacks    sync.Once          // the driver lacks operational events: logged once
}

// bounded runs f and waits at most d for it. NVML calls cannot be cancelled:
// on timeout f keeps running on its goroutine and its result is ignored.
func bounded(d time.Duration, f func()) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// Open initialises NVML, enumerates the GPUs, resolves the selection and reads
// each selected GPU's static facts. It returns an error wrapping ErrNoDriver
// or ErrNoGPU when there is nothing to monitor.
func Open(lib Library, o OpenOptions) (*Host, error) {
	if o.Timeout <= 0 {
		o.Timeout = 20 * time.Second
	}
	log := cmp.Or(o.Logger, slog.New(slog.DiscardHandler))
	var ret nvml.Return
	if !bounded(o.Timeout, func() { ret = lib.Init() }) {
		return nil, fmt.Errorf("nvmlInit did not return within %s", o.Timeout)
	}
	switch ret {
	case nvml.SUCCESS:
	case nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED:
		return nil, fmt.Errorf("%w: nvmlInit: %s", ErrNoDriver, retText(ret))
	default:
		return nil, fmt.Errorf("nvmlInit: %s", retText(ret))
	}
	h := &Host{lib: lib, kclock: o.KernelClock, reg: counters.Need(o.Counters, "sampler.OpenOptions.Counters")}
	if h.kclock.IsZero() {
		h.kclock = kclock.New()
	}
	h.Syms = LookupSymbols(lib.LookupSymbol)
	nat := newNative(lib)
	if m := h.Syms.Missing(); len(m) > 0 {
		log.Info("driver lacks newer functions; using fallbacks or leaving readings empty", "missing", strings.Join(m, ","))
	}

	var count int
	ok := bounded(o.Timeout, func() {
		if v, r := lib.SystemGetDriverVersion(); r == nvml.SUCCESS {
			h.System.DriverVersion = reading.Text(v)
		}
		if h.Syms.Has(FnNVMLVersion) {
			if v, r := lib.SystemGetNVMLVersion(); r == nvml.SUCCESS {
				h.System.NVMLVersion = reading.Text(v)
			}
		}
		if h.Syms.Has(FnCudaVersion) {
			if v, r := lib.SystemGetCudaDriverVersion(); r == nvml.SUCCESS && v > 0 {
				h.System.CUDAVersion = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
			}
		}
		count, ret = lib.DeviceGetCount()
	})
	if !ok {
		h.Close(time.Second)
		return nil, fmt.Errorf("nvmlDeviceGetCount did not return within %s", o.Timeout)
	}
	if ret != nvml.SUCCESS {
		h.Close(o.Timeout)
		return nil, fmt.Errorf("nvmlDeviceGetCount: %s", retText(ret))
	}
	if count == 0 {
		h.Close(o.Timeout)
		return nil, fmt.Errorf("%w: the driver (version %s) reports 0 GPUs", ErrNoGPU, h.System.DriverVersion)
	}

	all := make([]*GPU, count)
	var wg sync.WaitGroup
	for i := range count {
		g := NewGPU(reading.GPU{Index: i}, nil, &h.Syms, o.Config, h.kclock, h.reg, log)
		g.staticDone = make(chan struct{})
		g.lib, g.native = lib, nat
		if o.startNative != nil {
			g.startNative = o.startNative
		}
		all[i] = g
		wg.Go(func() {
			defer close(g.staticDone)
			g.readStatic(lib)
		})
	}
	bounded(o.Timeout, wg.Wait)
	for _, g := range all {
		if !g.StaticDone() {
			fn, _, _ := g.InFlight()
			log.Error("GPU did not answer at start; monitoring it anyway", "gpu", g.Info().Index, "stuck_in", fn.String(), "waited", o.Timeout)
		}
	}

	sel, pending, err := selectGPUs(all, o.Select)
	if err != nil {
		h.Close(o.Timeout)
		return nil, err
	}
	if len(pending) > 0 {
		var idx []string
		for _, g := range sel {
			if !identified(g) {
				idx = append(idx, strconv.Itoa(g.Info().Index))
			}
		}
		log.Warn("--gpu selectors name no GPU identified at start; monitoring the GPUs not identified (stuck, or their UUID or bus id unread) in their place, until their facts show which they name",
			"pending", strings.Join(pending, ","), "gpus", strings.Join(idx, ","))
	}
	h.GPUs, h.pending, h.all = sel, pending, all
	if o.Config.Interval > 0 {
		h.Pacer = NewPacer(o.Config.Interval, h.reg, log)
		for _, g := range sel {
			g.pacer = h.Pacer
		}
	}
	return h, nil
}

// Close shuts NVML down, waiting at most d (nvmlShutdown can block while a
// GPU is faulted). It reports whether the shutdown returned in time.
func (h *Host) Close(d time.Duration) bool {
	return bounded(d, func() { h.lib.Shutdown() })
}

// readStatic reads the facts that do not change while the driver is loaded.
func (g *GPU) readStatic(lib Library) {
	info := g.Info()
	g.started(time.Now())
	g.begin(FnGetHandle)
	dev, ret := lib.DeviceGetHandleByIndex(info.Index)
	if !g.end(FnGetHandle, 0, ret) {
		g.setStaticErr(fmt.Sprintf("%s: %s", FnGetHandle, retText(ret)))
		return
	}
	g.setStaticErr("")
	g.hmu.Lock()
	g.dev = dev
	g.hmu.Unlock()
	g.resetHealth()
	info.Name = g.text(FnName, dev.GetName)
	// A board's identity never goes back to unknown: a read that fails
	// again (the GPU lost, an unknown error) keeps what an earlier one had.
	info.UUID = cmp.Or(g.text(FnUUID, dev.GetUUID), info.UUID)
	info.Serial = g.text(FnSerial, dev.GetSerial)
	info.VBIOS = g.text(FnVbios, dev.GetVbiosVersion)
	info.BusID = cmp.Or(g.readBusID(dev), info.BusID)
	if v, ok := ask(g, FnMinorNumber, 0, dev.GetMinorNumber); ok {
		info.MinorNumber = reading.Some(v)
	}
	info.NumFans = g.readNumFans(dev)
	th := func(t nvml.TemperatureThresholds) reading.Opt[uint32] {
		v, ok := ask(g, FnThreshold, int(t), func() (uint32, nvml.Return) { return dev.GetTemperatureThreshold(t) })
		if ok && v > 0 && g.within(FnThreshold, uint64(v), 0, maxTempC) {
			return reading.Some(v)
		}
		return reading.Opt[uint32]{}
	}
	info.Thresholds = reading.Thresholds{
		Shutdown: th(nvml.TEMPERATURE_THRESHOLD_SHUTDOWN),
		Slowdown: th(nvml.TEMPERATURE_THRESHOLD_SLOWDOWN),
		MemMax:   th(nvml.TEMPERATURE_THRESHOLD_MEM_MAX),
		GPUMax:   th(nvml.TEMPERATURE_THRESHOLD_GPU_MAX),
	}
	info.GSPVersion = g.text(FnGspVersion, dev.GetGspFirmwareVersion)
	if m, ok := ask(g, FnGspMode, 0, func() (m [2]bool, r nvml.Return) { m[0], m[1], r = dev.GetGspFirmwareMode(); return }); ok {
		info.GSPMode = "disabled"
		if m[0] {
			info.GSPMode = "enabled"
		}
		if m[1] {
			info.GSPMode += " (default)"
		}
	}
	if v, ok := ask(g, FnDefaultLimit, 0, dev.GetPowerManagementDefaultLimit); ok && v > 0 {
		info.PowerLimitDefaultMW = reading.Some(v)
	}
	if g.lost {
		g.setStaticErr("GPU is lost")
	}
	g.lost = false
	g.exec.Store(g.startExec(info.Index))
	g.publish(&info)
}

// text reads a text fact through fn (ask); "" when it could not be read.
func (g *GPU) text(fn Fn, f func() (string, nvml.Return)) string {
	if v, ok := ask(g, fn, 0, f); ok {
		return reading.Text(v)
	}
	return ""
}

// readBusID reads the GPU's PCI bus id, upper case; "" when it could not be
// read.
func (g *GPU) readBusID(dev Device) string {
	p, ok := ask(g, FnPciInfo, 0, dev.GetPciInfo)
	if !ok {
		return ""
	}
	id := cString(p.BusId[:])
	if id == "" {
		id = cString(p.BusIdLegacy[:])
	}
	return strings.ToUpper(id)
}

// readIdentity reads again, in a sample, the facts that name the GPU (its
// UUID, its bus id) that the start-up read could not have while the rest
// was read, and publishes them with the other facts once had (Info): what
// reads Info later (events.log lines, the repair state, CPER reads, event
// sets opened again) names the GPU by them. It returns the facts as
// published.
func (g *GPU) readIdentity(info *reading.GPU) *reading.GPU {
	next := *info
	if next.UUID == "" {
		next.UUID = g.text(FnUUID, g.dev.GetUUID)
	}
	if next.BusID == "" {
		next.BusID = g.readBusID(g.dev)
	}
	if next.UUID == info.UUID && next.BusID == info.BusID {
		return info
	}
	g.publish(&next)
	return &next
}

// ask makes the Go call fn (for threshold or fan idx: a static fact, the
// remap histogram) when it may be made (can), marked in flight; ok when it
// succeeded (end).
func ask[T any](g *GPU, fn Fn, idx int, f func() (T, nvml.Return)) (v T, ok bool) {
	if !g.can(fn, idx) {
		return v, false
	}
	g.begin(fn)
	v, ret := f()
	return v, g.end(fn, idx, ret)
}

// startExec returns the executor for the GPU's samples, or nil when it
// cannot start (no C handle): the samples then fail, saying why, until the
// static facts are read again (counted, logged the first time).
func (g *GPU) startExec(index int) *nativeExec {
	x, err := g.startNative(g.native, index, g.cfg.FieldWait)
	if err == nil {
		g.execErr.Store(nil)
		return x
	}
	g.reg.Inc(nativeExecFailures)
	if g.execTold.CompareAndSwap(false, true) {
		g.log.Warn("cannot start the GPU's executor: its samples fail until its static facts are read again (counted as native_exec_failures)", "error", err)
	}
	e := "cannot start the GPU's executor: " + err.Error()
	g.execErr.Store(&e)
	return nil
}

// readNumFans returns the number of fans; old drivers without
// nvmlDeviceGetNumFans get 1 when the single-fan call answers, else 0.
func (g *GPU) readNumFans(dev Device) int {
	if g.syms.Has(FnNumFans) {
		if n, ok := ask(g, FnNumFans, 0, dev.GetNumFans); ok && n >= 0 && n <= 64 {
			return n
		}
		return 0
	}
	if _, ok := ask(g, FnFanSpeed, 0, dev.GetFanSpeed); ok {
		return 1
	}
	return 0
}

// cString is a NUL-terminated C string from the driver, through reading.Text.
func cString(b []int8) string {
	s := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(b))), len(b))
	if i := bytes.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	return reading.Text(string(s))
}

// selectGPUs resolves --gpu selectors (index, UUID or PCI bus id). A
// selector that names no GPU identified at start, while some GPUs are not
// (stuck at start, no handle, or their UUID or bus id unread: asked again
// as they are sampled), is pending: those GPUs are selected in its place,
// since one of them may be the one it names (a GPU stuck in a fault is the
// one to record). Otherwise it is an error.
func selectGPUs(all []*GPU, sel []string) (out []*GPU, pending []string, err error) {
	if len(sel) == 0 {
		return all, nil, nil
	}
	picked := make([]bool, len(all))
	for _, s := range sel {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		i, err := matchGPU(all, s)
		if err == nil {
			picked[i] = true
			continue
		}
		unknown := false
		for i, g := range all {
			if !identified(g) {
				picked[i], unknown = true, true
			}
		}
		// An index needs no static facts: it never waits for them.
		if sel, _ := reading.ParseSelector(s); !errors.Is(err, ErrUnknownGPU) || !unknown || sel.IsIndex() {
			return nil, nil, err
		}
		pending = append(pending, s)
	}
	for i, g := range all {
		if picked[i] {
			out = append(out, g)
		}
	}
	if len(out) == 0 {
		return nil, nil, fmt.Errorf("%w: none selected", ErrUnknownGPU)
	}
	return out, pending, nil
}

// identified reports whether g's facts name it: its UUID and bus id are
// known, the facts a selector matches.
func identified(g *GPU) bool {
	info := g.Info()
	return g.FactsKnown() && info.UUID != "" && info.BusID != ""
}

// FactsKnown reports whether the GPU's static facts (UUID, bus id, fans...)
// have been read: the start-up read returned with a handle. A GPU whose
// handle failed at start has them once a sample's retry got one.
func (g *GPU) FactsKnown() bool { return g.StaticDone() && g.Device() != nil }

// matchGPU returns the index in all of the GPU selector s names
// (reading.Selector: index, UUID or a prefix of it, PCI bus id). A UUID
// prefix that names more than one GPU is an error, as one that names none.
func matchGPU(all []*GPU, s string) (int, error) {
	sel, ok := reading.ParseSelector(s)
	if !ok {
		return 0, fmt.Errorf("%w: %s: not a GPU index, UUID (or a prefix of 4 or more characters) or PCI bus id", ErrUnknownGPU, s)
	}
	if sel.IsIndex() {
		if sel.Index >= len(all) {
			return 0, fmt.Errorf("%w: %s: no GPU with index %d (the driver reports %d GPUs, 0..%d)", ErrUnknownGPU, s, sel.Index, len(all), len(all)-1)
		}
		return sel.Index, nil
	}
	var found []int
	for i, g := range all {
		info := g.Info()
		if sel.Exact(info.UUID) {
			return i, nil
		}
		if sel.Matches(info.UUID, info.BusID) {
			found = append(found, i)
		}
	}
	switch len(found) {
	case 0:
		return 0, fmt.Errorf("%w: %s: no GPU has this index, UUID or PCI bus id", ErrUnknownGPU, s)
	case 1:
		return found[0], nil
	}
	return 0, fmt.Errorf("%w: %s: names %d GPUs (a UUID prefix they share): give more of the UUID", ErrUnknownGPU, s, len(found))
}

// Pending returns the --gpu selectors left pending at start (selectGPUs);
// nil when every selector was resolved.
func (h *Host) Pending() []string { return h.pending }

// Names returns the pending selectors that g's static facts match, once it
// has them.
func (h *Host) Names(g *GPU) []string {
	var out []string
	info := g.Info()
	for _, s := range h.pending {
		if sel, ok := reading.ParseSelector(s); ok && sel.Matches(info.UUID, info.BusID) {
			out = append(out, s)
		}
	}
	return out
}

// KernelTime converts a wall-clock reading to the kernel log's clock.
func (h *Host) KernelTime(t time.Time) time.Duration { return h.kclock.At(t) }

// KernelClock returns the host's kernel log clock (the kernel log reader
// publishes its fit there; Wall maps a printk timestamp to wall time).
func (h *Host) KernelClock() kclock.Clock { return h.kclock }

// Counters returns the registry the host, its GPUs and their process
// readers count in (OpenOptions.Counters).
func (h *Host) Counters() *counters.Registry { return h.reg }

// Count returns how many GPUs the driver enumerates now (one call, not tied
// to any GPU). The caller bounds it.
func (h *Host) Count() (int, error) {
	n, ret := h.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return 0, fmt.Errorf("nvmlDeviceGetCount: %s", retText(ret))
	}
	return n, nil
}

// Enumerated returns how many GPUs the driver enumerated at start.
func (h *Host) Enumerated() int { return len(h.all) }

// EnumeratedUUIDs returns the UUID of every GPU the driver enumerated at
// start, those --gpu did not select included, by index, as known now: ""
// for a GPU whose UUID has not been read (it did not answer at start, or
// its UUID read failed; a selected GPU's is read again as it is sampled,
// another's by Reidentify).
// A board of the previous run is missing only when none of them is its
// UUID.
func (h *Host) EnumeratedUUIDs() []string {
	out := make([]string, len(h.all))
	for i, g := range h.all {
		out[i] = g.Info().UUID
	}
	return out
}

// Reidentify reads again the UUID (and bus id) of each GPU --gpu did not
// select whose UUID is not known (EnumeratedUUIDs; a selected GPU's is
// read again as it is sampled): its static facts when its handle failed at
// start, else the facts that name it (GPU.reread, at most every
// staticRetry). Each read runs on a goroutine of its own and is not waited
// for: one stuck in the driver stays in flight, is not begun again, and
// holds up nothing; a GPU whose start-up read has not returned is left to
// it. A later EnumeratedUUIDs has what they read. Not for the poll loop:
// it starts goroutines.
func (h *Host) Reidentify() {
	for _, g := range h.all {
		if g.Info().UUID != "" || slices.Contains(h.GPUs, g) || !g.StaticDone() || !g.rereading.CompareAndSwap(false, true) {
			continue
		}
		go func() {
			defer g.rereading.Store(false)
			g.lost = false // a GPU found lost refuses every call (can) until this is reset, as each sample does
			g.reread(time.Now())
		}()
	}
}

// UnselectedInDriver returns the index of each GPU --gpu did not select
// whose read has not returned: its start-up read, or Reidentify's. Such a
// read may be stuck inside the driver; nvmlShutdown must not be called
// under it.
func (h *Host) UnselectedInDriver() []int {
	var out []int
	for _, g := range h.all {
		if !slices.Contains(h.GPUs, g) && (!g.StaticDone() || g.rereading.Load()) {
			out = append(out, g.Info().Index)
		}
	}
	return out
}

// Enumerate lists the UUIDs the driver enumerates now ("" where unread), to
// tell which GPUs fell off the bus: 1 + 2 x count calls, meant for after
// Count dropped. The caller bounds it.
func (h *Host) Enumerate() ([]string, error) {
	n, err := h.Count()
	if err != nil {
		return nil, err
	}
	out := make([]string, n)
	for i := range n {
		if dev, ret := h.lib.DeviceGetHandleByIndex(i); ret == nvml.SUCCESS {
			if u, ret := dev.GetUUID(); ret == nvml.SUCCESS {
				out[i] = u
			}
		}
	}
	return out, nil
}
