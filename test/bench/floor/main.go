// Command floor is the CPU floor `make bench` sets the logger's figures
// against: a bare Go program that wakes every -interval (a time.Ticker) and
// does nothing, with GOMAXPROCS=1 like the logger. The machines this project
// runs on change speed by up to 2x within a day; the ratio to this floor,
// measured in the same run, does not.
//
// With -socket PATH it also answers every connection on a unix socket with
// one short line, a goroutine per connection as the control socket does:
// the floor for what a request costs any Go server on the machine (the live
// interface rows ask it as often as they ask the logger).
//
// With -rows DIR it is the write floor: the whole durability requirement
// the logger keeps, and nothing else. It appends one row of -row-bytes to
// each of -files files in DIR every wake-up, one write(2) per row as the
// logger writes its CSVs, and every -sync-interval fdatasyncs each file, on
// a thread of its own named floor-fsync (as the logger's fdatasync thread
// is its own), so that its share can be read from schedstat. Next to the
// bare floor, what the requirement costs a minimal Go program on that file
// system, measured without a profiler.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// syncThread names the write floor's fdatasync thread (test/bench reads
// its schedstat by this name).
const syncThread = "floor-fsync"

func main() {
	iv := flag.Duration("interval", 100*time.Millisecond, "wake-up period")
	sock := flag.String("socket", "", "also answer connections on this unix socket")
	rows := flag.String("rows", "", "also append one row to each of -files files in this directory every wake-up")
	files := flag.Int("files", 8, "files written with -rows")
	rowBytes := flag.Int("row-bytes", 144, "bytes of a row, newline included, with -rows")
	syncEvery := flag.Duration("sync-interval", time.Second, "with -rows, fdatasync each file this often (0: never)")
	flag.Parse()
	runtime.GOMAXPROCS(1)
	if *sock != "" {
		os.Remove(*sock)
		ln, err := net.Listen("unix", *sock)
		if err != nil {
			os.Exit(1)
		}
		go serve(ln)
	}
	var out []*os.File
	if *rows != "" {
		for i := range *files {
			f, err := os.OpenFile(filepath.Join(*rows, fmt.Sprintf("rows%d.csv", i)), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
			if err != nil {
				os.Exit(1)
			}
			out = append(out, f)
		}
	}
	if len(out) > 0 && *syncEvery > 0 {
		go syncLoop(out, *syncEvery)
	}
	row := append(bytes.Repeat([]byte("1"), max(*rowBytes-1, 0)), '\n')
	t := time.NewTicker(*iv)
	for range t.C {
		for _, f := range out {
			if _, err := f.Write(row); err != nil {
				os.Exit(1)
			}
		}
	}
}

// syncLoop fdatasyncs every file each period, one after the other, on a
// thread of its own.
func syncLoop(files []*os.File, every time.Duration) {
	runtime.LockOSThread()
	unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&append([]byte(syncThread), 0)[0])), 0, 0, 0)
	t := time.NewTicker(every)
	for range t.C {
		for _, f := range files {
			if err := unix.Fdatasync(int(f.Fd())); err != nil {
				os.Exit(1)
			}
		}
	}
}

func serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			c.SetDeadline(time.Now().Add(2 * time.Second))
			if _, err := bufio.NewReaderSize(c, 256).ReadSlice('\n'); err == nil {
				c.Write([]byte("{\"ok\":true}\n"))
			}
		}()
	}
}
