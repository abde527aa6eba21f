package report

import (
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// The report's cost on one day of 8 GPUs at 100 ms (6.9 million rows), in
// the logger's own archive: rows formatted by sink.AppendRow under
// sink.Header, the day gzipped by sink.CompressFile (in members), as the
// logger leaves it. The same day gzipped in one member (as earlier versions
// and gzip(1) wrote it) shows what the members save. Targets: any 70 s
// window under 0.5 s, a 24 h window under 200 MB.
const (
	benchGPUs = 8
	benchRows = 864000 // a day at 100 ms
)

var (
	benchDay  = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	benchOnce sync.Once
	benchDirs [2]string // [0]: in members (the logger's), [1]: one member
	benchErr  error
)

// TestMain removes the benchmarks' archive (about 260 MB) at the end.
func TestMain(m *testing.M) {
	code := m.Run()
	if benchDirs[0] != "" {
		os.RemoveAll(filepath.Dir(benchDirs[0]))
	}
	os.Exit(code)
}

// benchArchive writes the day once per test binary run.
func benchArchive(b *testing.B) (members, oneMember string) {
	benchOnce.Do(func() {
		root, err := os.MkdirTemp("", "report-bench-")
		if err != nil {
			benchErr = err
			return
		}
		benchDirs = [2]string{filepath.Join(root, "members"), filepath.Join(root, "one-member")}
		for _, d := range benchDirs {
			if benchErr = os.MkdirAll(d, 0o755); benchErr != nil {
				return
			}
		}
		for g := 0; g < benchGPUs; g++ {
			if benchErr = benchWriteDay(benchDirs[0], benchDirs[1], g); benchErr != nil {
				return
			}
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchDirs[0], benchDirs[1]
}

func benchWriteDay(members, one string, gpu int) error {
	name := fmt.Sprintf("gpu%d-deep-2026-11-30.csv", gpu)
	path := filepath.Join(members, name)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	buf := append([]byte(nil), sink.Header(2)...)
	s := reading.Sample{GPU: gpu, NumFans: 2, Values: reading.Values{reading.PCIeGen: reading.Some[uint64](5), reading.PCIeWidth: reading.Some[uint64](16),
		reading.PowerLimitMW: reading.Some[uint64](600_000), reading.EnforcedLimitMW: reading.Some[uint64](600_000), reading.PState: reading.Some[uint64](1),
		reading.VRAMUsedBytes: reading.Some[uint64](52 << 30), reading.Throttle: reading.Some[uint64](0)}}
	for j := range reading.Table { // a datacenter GPU's row: every health counter read
		if d := &reading.Table[j]; d.CSV != "" {
			if d.IsHealth() {
				d.Set(&s, 3)
			}
		}
	}
	for i := 0; i < benchRows; i++ {
		s.Time = benchDay.Add(time.Duration(i) * 100 * time.Millisecond)
		s.KernelTime = time.Duration(i) * 100 * time.Millisecond
		s.Set(reading.TempC, uint64(55+i%3))
		s.Set(reading.MemTempC, uint64(62+i%2))
		s.Set(reading.PowerMW, uint64(380_000+(i*7919)%20_000))
		s.Values[reading.EnergyMJ] = reading.Some(uint64(i) * 38_000)
		s.Set(reading.GraphicsMHz, 2400)
		s.Set(reading.SMMHz, 2400)
		s.Set(reading.MemMHz, 13801)
		s.Set(reading.GPUUtil, uint64(90+i%5))
		s.Set(reading.MemUtil, 38)
		s.Fans[0] = reading.Fan{Speed: reading.Some(uint32(35 + i%2)), Target: reading.Some[uint32](35)}
		s.Fans[1] = s.Fans[0]
		buf = sink.AppendRow(buf, &s, 2)
		if len(buf) > 1<<20 {
			if _, err := f.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	if _, err := f.Write(buf); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	// One member, as gzip(1) writes it, for the comparison.
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	out, err := os.Create(filepath.Join(one, name+".gz"))
	if err != nil {
		return err
	}
	zw, _ := gzip.NewWriterLevel(out, gzip.BestSpeed)
	if _, err := io.Copy(zw, in); err != nil {
		return err
	}
	in.Close()
	if err := zw.Close(); err != nil {
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return sink.CompressFile(path)
}

// benchReport builds the report of the window [at-before, at+10s] of every
// GPU, reporting the peak of the heap in use while it builds (sampled every
// 2 ms) and the rows it keeps.
func benchReport(b *testing.B, dir string, at time.Time, before time.Duration) {
	var peak uint64
	rows := 0
	for b.Loop() {
		runtime.GC()
		stop := make(chan struct{})
		done := make(chan uint64)
		go func() {
			var max uint64
			var ms runtime.MemStats
			t := time.NewTicker(2 * time.Millisecond)
			defer t.Stop()
			for {
				runtime.ReadMemStats(&ms)
				if v := ms.HeapInuse + ms.StackInuse; v > max {
					max = v
				}
				select {
				case <-stop:
					done <- max
					return
				case <-t.C:
				}
			}
		}()
		rep, err := Build(Options{Dir: dir, At: at, GPU: -1, Before: before, After: 10 * time.Second, Loc: time.UTC})
		close(stop)
		if p := <-done; p > peak {
			peak = p
		}
		if err != nil {
			b.Fatal(err)
		}
		rows = 0
		for _, g := range rep.GPUs {
			rows += len(g.Rows)
		}
		if len(rep.GPUs) != benchGPUs {
			b.Fatalf("%d GPUs in the report", len(rep.GPUs))
		}
	}
	b.ReportMetric(float64(peak)/1e6, "peak-MB")
	b.ReportMetric(float64(rows), "rows-kept")
}

// BenchmarkReportWindow70s: a 70 s window (60 s before, 10 s after) at
// 13:00 and at 23:50, in the logger's archive and in a one-member gzip.
func BenchmarkReportWindow70s(b *testing.B) {
	members, one := benchArchive(b)
	for _, c := range []struct {
		name string
		dir  string
		at   time.Duration
	}{
		{"1300", members, 13 * time.Hour},
		{"2350", members, 23*time.Hour + 50*time.Minute},
		{"2350-one-member-gz", one, 23*time.Hour + 50*time.Minute},
	} {
		b.Run(c.name, func(b *testing.B) { benchReport(b, c.dir, benchDay.Add(c.at), time.Minute) })
	}
}

// BenchmarkReportWindow24h: the whole day, thinned as it is read.
func BenchmarkReportWindow24h(b *testing.B) {
	members, _ := benchArchive(b)
	benchReport(b, members, benchDay.Add(24*time.Hour-11*time.Second), 24*time.Hour)
}
