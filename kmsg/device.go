package kmsg

import (
	"context"
	"errors"
	"io"
	"syscall"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// recordBufSize is the read buffer for /dev/kmsg. One read returns one
// record and fails with EINVAL if the buffer is smaller than the record;
// the kernel caps a record with its dictionary at 8 KiB
// (CONSOLE_EXT_LOG_MAX), so twice that is safe.
const recordBufSize = 16 << 10

// deviceSource follows /dev/kmsg: one record per read(2), the ring's
// records after the last one handed on first (as backlog, read without
// waiting until EAGAIN), then each new one as the kernel logs it; an
// overrun (EPIPE) is counted and reading goes on at the oldest record
// still there.
type deviceSource struct{ *Reader }

func (r deviceSource) follow(ctx context.Context, fn func(Record)) error {
	buf := make([]byte, recordBufSize)
	// The records already in the ring when Run begins (after the last one
	// handed on) are read without waiting, as backlog, until it is empty.
	backlog := r.readNow != nil
	var newest reading.Opt[uint64] // the newest record read in the backlog phase
	for {
		var (
			n   int
			err error
		)
		if backlog {
			n, err = r.readNow(buf)
		} else {
			n, err = r.read(buf)
		}
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			switch {
			case backlog && isEAGAIN(err):
				backlog = false // caught up: later records are fresh
				r.checkAhead(newest)
				newest = reading.Opt[uint64]{}
				if r.onCaughtUp != nil {
					r.onCaughtUp()
				}
				continue
			case isEPIPE(err):
				// The kernel overwrote records we had not read yet; the
				// next read returns the oldest one still there, and the
				// gap in sequence numbers says how many were lost.
				r.counts.Inc(ringOverruns)
				continue
			case errors.Is(err, io.EOF), isEAGAIN(err):
				// /dev/kmsg never ends, and waits in the poller; another
				// character device might end, or not be pollable.
				if err := r.wait(ctx); err != nil {
					return nil
				}
				continue
			}
			if _, ok := r.reopenAfterError(ctx, err); !ok {
				return nil
			}
			backlog = r.readNow != nil // read what came meanwhile, after the last record handed on
			continue
		}
		rec, err := ParseRecord(buf[:n])
		if err != nil {
			r.counts.Inc(malformedRecords)
			continue
		}
		rec.Backlog = backlog
		if backlog {
			newest = reading.Some(rec.Seq)
		}
		r.handOn(rec, fn)
	}
}

func isEAGAIN(err error) bool { return errors.Is(err, syscall.EAGAIN) }

func isEPIPE(err error) bool { return errors.Is(err, syscall.EPIPE) }
