package fakenvml

import (
	"cmp"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/sampler/nvmlapi"
)

// Lib is a Library over fake devices.
type Lib struct {
	InitRet nvml.Return
	Devs    []*Dev
	// Missing are the functions the library lacks, by symbol: LookupSymbol
	// and Native do not find them, and calling one through a handle of the
	// library panics (Lib.dev), as a process calling it dies.
	Missing map[string]bool
	Shut    int
	// HandleRet makes DeviceGetHandleByIndex fail for an index.
	HandleRet map[int]nvml.Return
	// Driver is the driver version answered; "580.95.05" when empty.
	Driver string
}

func (l *Lib) Init() nvml.Return     { return l.InitRet }
func (l *Lib) Shutdown() nvml.Return { l.Shut++; return nvml.SUCCESS }
func (l *Lib) SystemGetDriverVersion() (string, nvml.Return) {
	return cmp.Or(l.Driver, "580.95.05"), nvml.SUCCESS
}
func (l *Lib) SystemGetNVMLVersion() (string, nvml.Return) { return "13.580.95.05", nvml.SUCCESS }
func (l *Lib) SystemGetCudaDriverVersion() (int, nvml.Return) {
	return 13000, nvml.SUCCESS
}
func (l *Lib) DeviceGetCount() (int, nvml.Return) { return len(l.Devs), nvml.SUCCESS }
func (l *Lib) DeviceGetHandleByIndex(i int) (nvmlapi.Device, nvml.Return) {
	if r, ok := l.HandleRet[i]; ok && r != nvml.SUCCESS {
		return nil, r
	}
	return l.dev(i), nvml.SUCCESS
}

// dev returns device i, told the functions the library lacks (Missing):
// as a process calling one of them dies, the Dev panics when one is called.
// Only nvmlDevice* names are enforced, and a Dev shared by two Libs takes
// the Missing set of the Lib that handed out its handle last.
func (l *Lib) dev(i int) *Dev {
	missing := map[string]bool{}
	for s := range l.Missing {
		if fn, ok := strings.CutPrefix(s, "nvmlDevice"); ok {
			missing[fn] = true
		}
	}
	d := l.Devs[i]
	d.mu.Lock()
	d.missing = missing
	d.mu.Unlock()
	return d
}
func (l *Lib) LookupSymbol(s string) error {
	if l.Missing[s] {
		return nvml.ERROR_FUNCTION_NOT_FOUND
	}
	return nil
}
