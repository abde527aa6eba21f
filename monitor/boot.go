package monitor

import (
	"context"
	"path/filepath"
	"sync"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// startBootCheck records this run (boot id, start) and, when the previous
// run did not stop cleanly, collects its evidence into crashes/boot-*.log
// on a goroutine counted in wg: sampling does not wait for it. A clean
// restart writes nothing.
func (m *Monitor) startBootCheck(ctx context.Context, wg *sync.WaitGroup) {
	bootID := snapshot.ReadBootID(filepath.Join(m.cfg.HostRoot, snapshot.DefaultBootIDPath))
	prev, err := m.beginRun(bootID)
	if err != nil {
		m.log.Warn("cannot record this run; the next start will not know whether it stopped cleanly", "error", err)
	}
	if !prev.Unclean() {
		return
	}
	m.log.Warn("the previous run did not stop cleanly; collecting its evidence", "prev_boot", prev.State.BootID, "boot", bootID,
		"prev_started", prev.State.Started)
	var pstore []string
	for _, d := range snapshot.DefaultPstoreDirs {
		pstore = append(pstore, filepath.Join(m.cfg.HostRoot, d))
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		bl, err := snapshot.WriteBootLog(ctx, snapshot.BootConfig{Dir: m.cfg.LogDir, Runner: m.cfg.Runner, Now: m.start,
			Prev: prev, BootID: bootID, Host: m.ident.Host, MachineID: m.ident.MachineID, PstoreDirs: pstore, CommandTimeout: m.cfg.CommandTimeout})
		line := bl.Event(m.start, prev, bootID)
		if err != nil {
			line.Fields = append(line.Fields, sink.Field{Key: "error", Value: err.Error()})
			m.log.Warn("cannot write the previous run's boot log", "error", err)
		} else {
			m.log.Warn("previous run's evidence written", "path", bl.Path, "same_boot", bl.SameBoot, "last_row", bl.LastRow)
			line.Snapshot = bl.Path // its evidence, under the key every incident line uses
		}
		m.eventLine(line)
	}()
}

// markCleanStop writes the clean-stop marker once every file is closed.
func (m *Monitor) markCleanStop() {
	if err := snapshot.MarkCleanStop(m.cfg.LogDir, time.Now()); err != nil {
		m.log.Warn("cannot write the clean-stop marker; the next start will report an unclean stop", "error", err)
	}
}
