package sink

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// Host describes the machine for system-info.txt.
type Host struct {
	Hostname, OS, Kernel, CPU, Board string   // Hostname: the kernel's, which --host may override
	Modules                          []string // loaded nvidia kernel modules (lines of /proc/modules)
}

// CollectHost reads the host facts from files under root ("/" on a real
// host), without running any program.
func CollectHost(root string) Host {
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	h := Host{Hostname: read("proc/sys/kernel/hostname")}
	if h.Hostname == "" {
		h.Hostname, _ = os.Hostname()
	}
	for _, l := range strings.Split(read("etc/os-release"), "\n") {
		if v, ok := strings.CutPrefix(l, "PRETTY_NAME="); ok {
			h.OS = strings.Trim(v, `"`)
		}
	}
	if root == "/" {
		var u unix.Utsname
		if unix.Uname(&u) == nil {
			h.Kernel = strings.Join([]string{unix.ByteSliceToString(u.Sysname[:]), unix.ByteSliceToString(u.Release[:]),
				unix.ByteSliceToString(u.Version[:]), unix.ByteSliceToString(u.Machine[:])}, " ")
		}
	} else {
		h.Kernel = read("proc/sys/kernel/osrelease")
	}
	sc := bufio.NewScanner(strings.NewReader(read("proc/cpuinfo")))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			h.CPU = strings.TrimSpace(v)
			break
		}
	}
	h.Board = strings.TrimSpace(read("sys/devices/virtual/dmi/id/board_vendor") + " " + read("sys/devices/virtual/dmi/id/board_name"))
	for _, l := range strings.Split(read("proc/modules"), "\n") {
		if strings.Contains(strings.ToLower(l), "nvidia") {
			h.Modules = append(h.Modules, l)
		}
	}
	return h
}

// SystemInfo is everything system-info.txt says.
type SystemInfo struct {
	Version   string // gpu-telemetry's version
	Generated time.Time
	Identity  reading.Identity // the host as every output names it (--host, machine id, boot id)
	Host      Host
	System    reading.System
	GPUs      []reading.GPU
	Notes     map[int]string // per GPU index: why facts are missing
	// Health is per GPU index which health counter groups the GPU answered
	// (absent: not read yet).
	Health map[int]string
	// Fabric is which fabric daemons run (FabricServices), set where a
	// GPU reports an NVLink fabric; nil: not shown.
	Fabric []reading.FabricService
	// KernelClock says how dmesg_time relates to the kernel log's clock
	// (kclock.Fit.Describe): the measured offset and its age.
	KernelClock string
}

func na(s string) string {
	if s == "" {
		return "n/a"
	}
	return s
}

func optC(o reading.Opt[uint32]) string {
	if v, ok := o.Get(); ok {
		return fmt.Sprintf("%dC", v)
	}
	return "n/a"
}

// RenderSystemInfo renders system-info.txt. The first two lines (title and
// generation time) are excluded when deciding whether to rewrite the file.
func RenderSystemInfo(si SystemInfo) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "=== GPU Telemetry - System Info ===\n")
	fmt.Fprintf(&b, "Generated: %s\n", si.Generated.Format(TimestampLayout))
	fmt.Fprintf(&b, "gpu-telemetry: %s\n\n", na(si.Version))
	// The host as events.log, the metrics, snapshots and status name it;
	// the kernel's hostname only where --host says otherwise.
	fmt.Fprintf(&b, "--- Host ---\n Host: %s (machine id %s, boot %s)\n", na(si.Identity.Host), na(si.Identity.MachineID), na(si.Identity.BootID))
	if si.Host.Hostname != "" && si.Host.Hostname != si.Identity.Host {
		fmt.Fprintf(&b, " Kernel hostname: %s (not the host's name here: --host)\n", si.Host.Hostname)
	}
	fmt.Fprintf(&b, " OS: %s\n Kernel: %s\n CPU: %s\n Board: %s\n\n",
		na(si.Host.OS), na(si.Host.Kernel), na(si.Host.CPU), na(si.Host.Board))
	fmt.Fprintf(&b, "--- Driver ---\n Driver: %s\n NVML: %s\n CUDA: %s\n\n",
		na(si.System.DriverVersion), na(si.System.NVMLVersion), na(si.System.CUDAVersion))
	if si.Fabric != nil {
		fmt.Fprintf(&b, "--- NVLink fabric ---\n Services: %s\n\n", FabricServicesText(si.Fabric))
	}
	fmt.Fprintf(&b, "--- Kernel log clock ---\n dmesg_time: %s\n\n", na(si.KernelClock))
	for _, g := range si.GPUs {
		fmt.Fprintf(&b, "--- GPU %d ---\n", g.Index)
		fmt.Fprintf(&b, " Name: %s\n UUID: %s\n PCI: %s\n Serial: %s\n VBIOS: %s\n",
			na(g.Name), na(g.UUID), na(g.BusID), na(g.Serial), na(g.VBIOS))
		fmt.Fprintf(&b, " Fans: %d\n", g.NumFans)
		th := g.Thresholds
		fmt.Fprintf(&b, " Thresholds: shutdown %s, slowdown %s, mem_max %s, gpu_max %s\n",
			optC(th.Shutdown), optC(th.Slowdown), optC(th.MemMax), optC(th.GPUMax))
		gsp := na(g.GSPVersion)
		if g.GSPMode != "" {
			gsp += ", mode " + g.GSPMode
		}
		fmt.Fprintf(&b, " GSP firmware: %s\n", gsp)
		if v, ok := g.PowerLimitDefaultMW.Get(); ok {
			fmt.Fprintf(&b, " Default power limit: %d W\n", (v+500)/1000)
		} else {
			fmt.Fprintf(&b, " Default power limit: n/a\n")
		}
		fmt.Fprintf(&b, " CSV: gpu%d-%s-deep-YYYY-MM-DD.csv (a day's later parts: _2.csv, _3.csv, ...)\n", g.Index, BoardID(g.UUID))
		if h, ok := si.Health[g.Index]; ok {
			fmt.Fprintf(&b, " Health counters: %s\n", h)
		} else {
			fmt.Fprintf(&b, " Health counters: not read yet\n")
		}
		if n := si.Notes[g.Index]; n != "" {
			fmt.Fprintf(&b, " Note: %s\n", n)
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "--- NVIDIA kernel modules ---\n")
	if len(si.Host.Modules) == 0 {
		b.WriteString(" n/a\n")
	}
	for _, m := range si.Host.Modules {
		fmt.Fprintf(&b, " %s\n", m)
	}
	return b.Bytes()
}

// bodyOf drops the title and Generated lines.
func bodyOf(b []byte) []byte {
	for range 2 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return nil
		}
		b = b[i+1:]
	}
	return b
}

// WriteSystemInfo writes dir/system-info.txt atomically unless the existing
// file already says the same (only its generation time would differ): it is
// rewritten when the driver version, the GPUs or the host change. Of the
// existing file no more is read than the new one's length and a little (a
// longer one differs), and one that is not a regular file is replaced,
// never waited on.
func WriteSystemInfo(dir string, si SystemInfo) (written bool, err error) {
	path := filepath.Join(dir, "system-info.txt")
	data := RenderSystemInfo(si)
	if old, err := ReadBounded(OpenRegular, path, int64(len(data))+4096, false); err == nil && bytes.Equal(bodyOf(old), bodyOf(data)) {
		return false, nil
	}
	if err := WriteFileAtomic(path, data, 0o644); err != nil {
		return false, err
	}
	return true, nil
}
