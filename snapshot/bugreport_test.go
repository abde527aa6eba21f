package snapshot

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// fakeHost builds the /proc and /sys a crash snapshot reads for the test
// GPU 0000:4b:00.0, below root port 0000:4a:01.0.
func fakeHost(t testing.TB) string {
	t.Helper()
	root := t.TempDir()
	write := func(rel, data string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gpu := "sys/devices/pci0000:4a/0000:4a:01.0/0000:4b:00.0"
	bridge := "sys/devices/pci0000:4a/0000:4a:01.0"
	write(gpu+"/power/runtime_status", "active\n")
	write(gpu+"/power/control", "auto\n")
	write(gpu+"/aer_dev_correctable", "RxErr 3\nBadTLP 0\nBadDLLP 0\nRollover 0\nTimeout 0\nNonFatalErr 0\nCorrIntErr 0\nHeaderOF 0\nTOTAL_ERR_COR 3\n")
	write(gpu+"/aer_dev_fatal", "Undefined 0\nDLP 0\nSDES 0\nTLP 0\nFCP 0\nCmpltTO 1\nCmpltAbrt 0\nUnxCmplt 0\nRxOF 0\nMalfTLP 0\nECRC 0\nUnsupReq 0\nACSViol 0\nTOTAL_ERR_FATAL 1\n")
	write(gpu+"/aer_dev_nonfatal", "Undefined 0\nDLP 0\nCmpltTO 0\nTOTAL_ERR_NONFATAL 0\n")
	write(bridge+"/aer_dev_correctable", "RxErr 12\nBadTLP 2\nTOTAL_ERR_COR 14\n")
	write(bridge+"/aer_dev_fatal", "SDES 1\nTOTAL_ERR_FATAL 1\n")
	// The bridge's non-fatal counter is missing (an older kernel).
	for _, d := range []struct{ addr, path string }{{"0000:4b:00.0", gpu}, {"0000:4a:01.0", bridge}} {
		link := filepath.Join(root, "sys/bus/pci/devices", d.addr)
		os.MkdirAll(filepath.Dir(link), 0o755)
		if err := os.Symlink(filepath.Join("../../..", strings.TrimPrefix(d.path, "sys/")), link); err != nil {
			t.Fatal(err)
		}
	}
	write("proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (dvs-builder@U22-I3-AF03-09-1)  Tue Sep 23 09:50:12 UTC 2025\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14+deb12u1)\n")
	write("proc/driver/nvidia/gpus/0000:4b:00.0/information", "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 171\nGPU UUID: \t GPU-8a1c7c8e-43d6-5a0e-11b2-9c1f0e3d7a21\nVideo BIOS: \t 96.00.99.00.01\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\nBus Location: \t 0000:4b:00.0\nDevice Minor: \t 3\nGPU Firmware: \t 580.95.05\nGPU Excluded:\t No\n")
	write("sys/module/nvidia/parameters/NVreg_EnableGpuFirmware", "18\n")
	write("sys/module/nvidia/parameters/NVreg_DynamicPowerManagement", "3\n")
	write("sys/module/nvidia/parameters/NVreg_RegistryDwords", "\n")
	modules, err := os.ReadFile(filepath.Join("testdata", "modules.txt"))
	if err != nil {
		t.Fatal(err)
	}
	write("proc/modules", string(modules))
	return root
}

func TestCrashSnapshotHasBugReportSections(t *testing.T) {
	m, _ := newTestManager(t, nil)
	if d := crash(m, 3, testEvent, testCrashRequest); !d.Accepted {
		t.Fatal("not accepted")
	}
	s := crashText(t, m)
	testutil.Contains(t, "snapshot", s,
		"=== GPU runtime power state (read first, before anything could wake the GPU) ===\nruntime_status: active\ncontrol: auto\n",
		"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05",
		"Bus Location: \t 0000:4b:00.0",
		"--- GPU 0000:4b:00.0\naer_dev_correctable: RxErr=3 TOTAL_ERR_COR=3\naer_dev_nonfatal: TOTAL_ERR_NONFATAL=0\naer_dev_fatal: CmpltTO=1 TOTAL_ERR_FATAL=1\n",
		"--- upstream bridge 0000:4a:01.0\naer_dev_correctable: RxErr=12 BadTLP=2 TOTAL_ERR_COR=14\naer_dev_nonfatal: (missing)\n",
		"NVreg_DynamicPowerManagement: 3\nNVreg_EnableGpuFirmware: 18\nNVreg_RegistryDwords: \n",
	)
	// The power state is shown right after the rows, before the diagnostics.
	if p, r := strings.Index(s, "runtime_status"), strings.Index(s, "=== dmesg"); p < 0 || p > r {
		t.Error("power state is not before the diagnostics")
	}
}

func TestRestrictedDmesgFallsBackToTheJournal(t *testing.T) {
	run := cannedRunner()
	run.results["dmesg"] = fakeResult{out: "dmesg: read kernel buffer failed: Operation not permitted\n", err: errors.New("dmesg: exit status 1")}
	run.results["journalctl"] = fakeResult{out: "[86400.120000] kernel: NVRM: Xid (PCI:0000:4b:00): 79, pid=2314, GPU has fallen off the bus.\n"}
	m, _ := newTestManager(t, func(c *Config) { c.Runner = run })
	r := runJob(context.Background(), m.cfg.CommandTimeout, m.kernelLogJob(kernelFilter{}).run)
	s := string(r.out)
	if r.status != "" || !strings.Contains(s, "dmesg failed: dmesg: read kernel buffer failed: Operation not permitted; this boot's kernel lines are from journalctl -k -b 0") ||
		!strings.Contains(s, "NVRM: Xid (PCI:0000:4b:00): 79") {
		t.Errorf("fallback: status %q, out:\n%s", r.status, s)
	}
	// Neither works: the section says both.
	delete(run.results, "journalctl")
	r = runJob(context.Background(), m.cfg.CommandTimeout, m.kernelLogJob(kernelFilter{}).run)
	if !strings.Contains(r.status, "dmesg: exit status 1 (and journalctl -k -b 0 instead: journalctl: not installed (Debian package systemd))") {
		t.Errorf("status %q", r.status)
	}
}

// A driver file whose read blocks (a FIFO here; /proc/driver/nvidia on a
// wedged GPU) holds its section for the command timeout, not the whole
// diagnostics' bound, and while that read has not come back the next
// snapshot does not start another one: it says why.
func TestStuckDriverFileNotReadAgain(t *testing.T) {
	host := fakeHost(t)
	version := filepath.Join(host, "proc/driver/nvidia/version")
	if err := os.Remove(version); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(version, 0o644); err != nil {
		t.Fatal(err)
	}
	m, _ := newTestManager(t, func(c *Config) {
		c.HostRoot = host
		c.CommandTimeout = 50 * time.Millisecond
		c.DiagnosticsTimeout = 3 * time.Second
	})
	t.Cleanup(func() { // a writer's open and close end the blocked read
		if f, err := os.OpenFile(version, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	const title = "NVIDIA driver version (/proc/driver/nvidia/version)"
	section := func(secs []Section) string {
		for _, s := range secs {
			if s.Title == title {
				return s.Body
			}
		}
		t.Fatalf("no section %q", title)
		return ""
	}
	start := time.Now()
	first := section(m.diagnose("00000000:4B:00.0", false))
	if took := time.Since(start); took > 2*time.Second || first != "(timed out after 50ms)\n" {
		t.Errorf("first snapshot took %v, its section %q; want the command timeout's", took, first)
	}
	start = time.Now()
	second := section(m.diagnose("00000000:4B:00.0", false))
	if took := time.Since(start); took > 2*time.Second || !strings.Contains(second, "(failed: not read: an earlier read of this file is still stuck") {
		t.Errorf("second snapshot took %v, its section %q; want the read not started again", took, second)
	}
}

// TestDriverFileOneStuckReadAcrossSnapshots: snapshots taken together (GPUs
// crashing at once all read the driver's version file) leave at most one
// read of a driver file blocked in the kernel: a read in flight is waited
// for, not started again; once given up on, the file is not read until
// that read comes back; then it is read again.
func TestDriverFileOneStuckReadAcrossSnapshots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g driverReads
		var started atomic.Int32
		release := make(chan struct{})
		read := func() ([]byte, error) {
			started.Add(1)
			<-release // blocked in the kernel until the test lets it go
			return []byte("570.86.15\n"), nil
		}
		const snapshots = 4
		errs := make(chan error, snapshots)
		for range snapshots {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), DefaultCommandTimeout)
				defer cancel()
				_, err := g.read(ctx, "version", read)
				errs <- err
			}()
		}
		synctest.Wait()
		if n := started.Load(); n != 1 {
			t.Errorf("%d snapshots at once started %d reads of the file, want 1", snapshots, n)
		}
		for range snapshots {
			if err := <-errs; !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("a snapshot's read = %v, want abandoned at its timeout", err)
			}
		}
		if _, err := g.read(context.Background(), "version", read); !errors.Is(err, errReadStuck) || started.Load() != 1 {
			t.Errorf("read while one is stuck = %v (%d started), want errReadStuck and none started", err, started.Load())
		}
		close(release)
		synctest.Wait()
		if b, err := g.read(context.Background(), "version", read); err != nil || string(b) != "570.86.15\n" || started.Load() != 2 {
			t.Errorf("read after the stuck one came back = %q, %v (%d started), want the file read again", b, err, started.Load())
		}
	})
}
