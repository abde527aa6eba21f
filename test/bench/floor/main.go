// Command floor is the CPU floor `make bench` sets the logger's figures
// against: a bare Go program that wakes every -interval (a time.Ticker) and
// does nothing, with GOMAXPROCS=1 like the logger. The machines this project
// runs on change speed by up to 2x within a day; the ratio to this floor,
// measured in the same run, does not.
package main

import (
	"flag"
	"runtime"
	"time"
)

func main() {
	iv := flag.Duration("interval", 100*time.Millisecond, "wake-up period")
	flag.Parse()
	runtime.GOMAXPROCS(1)
	t := time.NewTicker(*iv)
	for range t.C {
	}
}
