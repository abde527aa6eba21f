package main

import (
	"fmt"
	"io"

	"github.com/alecthomas/kong"
)

// exitCode carries kong's exit (after --help or --version) out of Parse.
type exitCode int

// parseFlags parses args into grammar with kong, for the logger and for every
// subcommand with flags; ${socket} in a grammar is defaultSocket. ok is false when the program should exit with
// code: bad flags (2, one line on stderr naming the program) or after --help
// and --version (kong's own code, usually 0).
func parseFlags(grammar any, name string, args []string, stdout, stderr io.Writer, opts ...kong.Option) (code int, ok bool) {
	opts = append([]kong.Option{kong.Name(name), kong.Writers(stdout, stderr), kong.Vars{"socket": defaultSocket},
		kong.Exit(func(c int) { panic(exitCode(c)) })}, opts...)
	parser, err := kong.New(grammar, opts...)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2, false
	}
	defer func() {
		if r := recover(); r != nil {
			c, isExit := r.(exitCode)
			if !isExit {
				panic(r)
			}
			code, ok = int(c), false
		}
	}()
	if _, err := parser.Parse(args); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2, false
	}
	return 0, true
}
