package sink

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// MaxLine is the longest line the readers of the logger's files take: a
// CSV row is under 2 KiB (a datacenter GPU's, every column filled) and an
// events.log line under 1 KiB, so a longer line is damage or was put
// there. It is skipped and counted (ReadLine), never held in memory whole:
// a CSV with a 1 GB line, or a small .csv.gz expanding to one, made report
// and the daemon's boot log take gigabytes.
const MaxLine = 64 << 10

// ErrLongLine is a line over MaxLine where a reader cannot skip it (a CSV's
// board line or header).
var ErrLongLine = fmt.Errorf("a line over %d KiB", MaxLine>>10)

// ErrNotRegular is reading a file of the log directory that is not a
// regular file: a FIFO (its reader waits forever for a writer), a device
// (/dev/zero never ends), a directory or a socket.
var ErrNotRegular = errors.New("not a regular file")

// NewLineReader returns a reader for ReadLine: its buffer holds a line of
// MaxLine bytes.
func NewLineReader(r io.Reader) *bufio.Reader {
	return bufio.NewReaderSize(r, MaxLine)
}

// ReadLine returns br's next line with its newline (the last line of a
// file may lack it), skipping the lines longer than MaxLine, or than br's
// buffer (NewLineReader's holds MaxLine), without holding them: each adds
// one to *long. The line is br's and valid until br is read again. err is
// br's: a long line that runs into it is counted and gives no line.
func ReadLine(br *bufio.Reader, long *int) ([]byte, error) {
	for {
		b, err := br.ReadSlice('\n')
		if err != bufio.ErrBufferFull && len(b) <= MaxLine {
			return b, err
		}
		// Discard the rest of the line, a buffer at a time.
		for err == bufio.ErrBufferFull {
			_, err = br.ReadSlice('\n')
		}
		*long++
		if err != nil {
			return nil, err
		}
	}
}

// OpenRegular opens a file of the log directory for reading, refusing
// (ErrNotRegular, with the path) what is not a regular file. It never
// waits: a FIFO is opened without blocking (O_NONBLOCK, which changes
// nothing for a regular file) and then refused.
func OpenRegular(path string) (*os.File, error) { return openRegular(path, 0) }

// OpenOwnRegular is OpenRegular for the files the daemon reads back from
// its own log directory (the compressor, the boot log): it also refuses a
// symbolic link (O_NOFOLLOW, as OpenNoFollow), whose target is not the
// daemon's to read or archive.
func OpenOwnRegular(path string) (*os.File, error) { return openRegular(path, syscall.O_NOFOLLOW) }

func openRegular(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|flag, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, &os.PathError{Op: "open", Path: path, Err: ErrNotRegular}
	}
	return f, nil
}

// ReadBounded reads at most max bytes of path, opened with open (os.Open
// for /proc and /sys, OpenRegular for the log directory's files): its
// start, or its end when tail is set. The size is not trusted to stop the
// read (/proc and /sys files say 0 or 4096): the reader's limit does.
func ReadBounded(open func(string) (*os.File, error), path string, max int64, tail bool) ([]byte, error) {
	f, err := open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if tail {
		fi, err := f.Stat()
		if err != nil {
			return nil, err
		}
		if fi.Size() > max {
			if _, err := f.Seek(fi.Size()-max, io.SeekStart); err != nil {
				return nil, err
			}
		}
	}
	return io.ReadAll(io.LimitReader(f, max))
}
