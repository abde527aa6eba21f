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
package main

import (
	"bufio"
	"flag"
	"net"
	"os"
	"runtime"
	"time"
)

func main() {
	iv := flag.Duration("interval", 100*time.Millisecond, "wake-up period")
	sock := flag.String("socket", "", "also answer connections on this unix socket")
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
	t := time.NewTicker(*iv)
	for range t.C {
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
