package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// xidOnly runs and prints only the Xid latency runs (-only xid).
func xidOnly(o opts) int {
	for _, viaKmsg := range []bool{false, true} {
		k := o
		k.viaKmsg = viaKmsg
		rows, err := xidRun(k)
		if err != nil {
			fmt.Fprintln(os.Stderr, "gtbench: Xid latency run:", err)
			return 1
		}
		for _, r := range rows {
			fmt.Printf("| %s | %s | %s |\n", r[0], r[1], r[2])
		}
	}
	return 0
}

// xidRun measures the time from an Xid (the simulated driver's kernel-log
// record of it carries its CLOCK_MONOTONIC time) to the crash snapshot file
// appearing (stage 1: header and rows) and being complete (stage 2, with the
// diagnostics, which are stubbed so the figure is the logger's own).
func xidRun(o opts) ([][3]string, error) {
	dir, clean, err := logDir(o, "xid")
	if err != nil {
		return nil, err
	}
	defer clean()
	stubs := filepath.Join(dir, "stubs")
	os.MkdirAll(stubs, 0o755)
	for _, c := range []string{"dmesg", "lspci", "setpci", "nvidia-smi", "free", "uptime"} {
		os.WriteFile(filepath.Join(stubs, c), []byte("#!/bin/sh\necho stub "+c+"\n"), 0o755)
	}
	var scn strings.Builder
	scn.WriteString("gpus 2\n")
	for i := range o.xids {
		if o.viaKmsg { // the kernel log only: the logger follows the sim's kmsg file
			fmt.Fprintf(&scn, "at %d gpu %d xid 62 to kmsg\n", 3+i, i%2)
		} else {
			fmt.Fprintf(&scn, "at %d gpu %d xid 62\n", 3+i, i%2)
		}
	}
	scnPath := filepath.Join(dir, "xid.scn")
	os.WriteFile(scnPath, []byte(scn.String()), 0o644)
	kmsg := filepath.Join(dir, "kmsg")
	os.WriteFile(kmsg, nil, 0o644)
	crashes := filepath.Join(dir, "crashes")
	os.MkdirAll(crashes, 0o755)

	var kmsgArgs []string
	if o.viaKmsg {
		kmsgArgs = []string{"--kmsg", kmsg}
	}
	in, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		return nil, err
	}
	defer unix.Close(in)
	if _, err := unix.InotifyAddWatch(in, crashes, unix.IN_CREATE|unix.IN_MOVED_TO); err != nil {
		return nil, err
	}
	type seen struct{ first, last time.Duration }
	files := map[string]*seen{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64<<10)
		for {
			n, err := unix.Read(in, buf)
			if err != nil || n <= 0 {
				return
			}
			now := monotonic()
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafePointer(&buf[off]))
				name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)]), "\x00")
				off += unix.SizeofInotifyEvent + int(ev.Len)
				if !strings.HasPrefix(name, "crash-") || strings.Contains(name, "+") {
					continue
				}
				if s := files[name]; s == nil {
					files[name] = &seen{first: now, last: now}
				} else {
					s.last = now
				}
			}
		}
	}()
	cmd, err := start(o, dir, []string{"SIMNVML_SCENARIO=" + scnPath, "SIMNVML_KMSG=" + kmsg, "PATH=" + stubs + ":" + os.Getenv("PATH")},
		append([]string{"--crash-cooldown", "1ms", "--follow-ups", "1h"}, kmsgArgs...)...)
	if err != nil {
		return nil, err
	}
	time.Sleep(time.Duration(3+o.xids+2) * time.Second)
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	unix.Close(in)

	// Xid times from the kernel-log records, in order.
	var xidAt []time.Duration
	b, _ := os.ReadFile(kmsg)
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.Contains(l, "Xid") {
			continue
		}
		if f := strings.SplitN(l, ",", 4); len(f) == 4 {
			us, _ := strconv.ParseInt(f[2], 10, 64)
			xidAt = append(xidAt, time.Duration(us)*time.Microsecond)
		}
	}
	var snaps []*seen
	for _, s := range files {
		snaps = append(snaps, s)
	}
	sort.Slice(snaps, func(i, j int) bool { return snaps[i].first < snaps[j].first })
	if len(snaps) == 0 || len(xidAt) == 0 {
		return nil, fmt.Errorf("no snapshots (%d) or Xids (%d) seen", len(snaps), len(xidAt))
	}
	var appear, complete []float64
	for i := 0; i < len(snaps) && i < len(xidAt); i++ {
		appear = append(appear, float64(snaps[i].first-xidAt[i])/1e6)
		complete = append(complete, float64(snaps[i].last-xidAt[i])/1e6)
	}
	stat := func(v []float64) string {
		sort.Float64s(v)
		return fmt.Sprintf("%.1f / %.1f ms", v[len(v)/2], v[len(v)-1])
	}
	via := "NVML event"
	if o.viaKmsg {
		via = "kernel log"
	}
	return [][3]string{
		{"Xid (" + via + ") to crash snapshot file (median / max)", stat(appear), fmt.Sprintf("target <= 50 ms; %d Xids; stage 1: header and last 50 rows", len(appear))},
		{"Xid (" + via + ") to complete snapshot (median / max)", stat(complete), "stage 2 with the diagnostics (commands stubbed)"},
	}, nil
}

// monotonic is CLOCK_MONOTONIC, the clock of the simulated kernel log's
// record times.
func monotonic() time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return time.Duration(ts.Nano())
}
