package main

import (
	"strings"
	"testing"
)

// A perf script excerpt (-F comm,tid,ip,sym) with one sample of each class.
const perfScriptSample = `gt-fsync  9959 
	ffffffff813e1a2b io_schedule
	          7f12aa fdatasync

gpu-telemetry  9957 
	ffffffff8225fd19 pvm_irq_enable
	ffffffff81520b11 ext4_buffered_write_iter
	ffffffff814a1c2d vfs_write
	ffffffff814a1e40 ksys_write
	           b1e2f internal/runtime/syscall/linux.Syscall6
	           b2a10 syscall.Syscall
	           b3c11 syscall.write
	          11a2b3 internal/poll.(*FD).Write
	          127a8a os.(*File).Write
	          2f1a2b github.com/gpu-telemetry/gpu-telemetry/sink.(*CSV).Write

gpu-telemetry  9957 
	           b1e2f runtime.entersyscall
	           b2a10 syscall.Syscall
	           b3c11 syscall.write
	          11a2b3 internal/poll.(*FD).Write
	          127a8a os.(*File).Write
	          2f1a2b github.com/gpu-telemetry/gpu-telemetry/sink.(*CSV).Write

gpu-telemetry  9957 
	          2f0a11 github.com/gpu-telemetry/gpu-telemetry/sink.AppendRow
	          2f1a2b github.com/gpu-telemetry/gpu-telemetry/sink.(*CSV).Write

gpu-telemetry  9957 
	ffffffff8225fd19 pvm_irq_enable
	ffffffff81399a10 schedule_hrtimeout_range_clock
	ffffffff814f0a11 do_epoll_wait
	           b1e2f internal/runtime/syscall/linux.Syscall6
	           6a1b2 runtime.netpoll
	           6f1d2 runtime.findRunnable

gpu-telemetry  9953 
	           a2b3c runtime.futex.abi0
	           6b1c2 runtime.notetsleep_internal
	           6c2d3 runtime.sysmon

gpu-telemetry  9957 
	ffffffff8225f761 sysvec_apic_timer_interrupt
	           33a275 github.com/gpu-telemetry/gpu-telemetry/monitor.(*Monitor).loop

gpu-telemetry  9957 
	            1a2b sim_eval
	            1c3d nvmlDeviceGetTemperature

gpu-telemetry  9957 
	           6b080 runtime.casgstatus
	           707d1 runtime.schedule

gpu-telemetry  9957 
	          340f75 github.com/gpu-telemetry/gpu-telemetry/sampler.(*GPU).Sample
	          340e6b github.com/gpu-telemetry/gpu-telemetry/sampler.(*Worker).Run
`

func TestParsePerfScript(t *testing.T) {
	p, err := parsePerfScript(strings.NewReader(perfScriptSample))
	if err != nil {
		t.Fatal(err)
	}
	want := [numShares]int{
		shareFsync:   1,
		shareWrite:   2, // in the kernel, and in Go's wrapper on the way in
		shareWakeups: 2, // epoll_pwait in the kernel, futex at its stub
		shareKernel:  1,
		shareDriver:  1,
		shareRuntime: 1,
		shareOurs:    2, // formatting the row is not its write(2)
	}
	if p.n != want || p.total != 10 {
		t.Errorf("classes %v (total %d), want %v (10)", p.n, p.total, want)
	}
	if f := p.frac(shareWrite); f != 2.0/10 {
		t.Errorf("write fraction %v, want 2/10", f)
	}
	var none *profile
	if f := none.frac(shareWrite); f != 0 {
		t.Errorf("no profile: fraction %v, want 0", f)
	}
}

func TestSpread(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want spread
	}{
		{[]float64{3, 1, 2}, spread{2, 1, 3}},
		{[]float64{4, 1, 3, 2}, spread{2.5, 1, 4}},
		{[]float64{5}, spread{5, 5, 5}},
	} {
		if got := spreadOf(c.in); got != c.want {
			t.Errorf("spreadOf(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
