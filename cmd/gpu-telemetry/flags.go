package main

import (
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kong"

	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// exitCode carries kong's exit (after --help or --version) out of Parse.
type exitCode int

// parseFlags parses args into grammar with kong, for the logger and for every
// subcommand with flags (flagVars: ${socket}, ${log_dir}, ...). ok is false when the program should exit with
// code: bad flags (2, one line on stderr naming the program) or after --help
// and --version (kong's own code, usually 0).
func parseFlags(grammar any, name string, args []string, stdout, stderr io.Writer, opts ...kong.Option) (code int, ok bool) {
	opts = append([]kong.Option{kong.Name(name), kong.Writers(stdout, stderr), flagVars(),
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
	if _, err := parser.Parse(joinNegativeValues(parser, args)); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2, false
	}
	return 0, true
}

// negativeNumber is a value that starts like a short flag: -1, -0.5, -1s.
var negativeNumber = regexp.MustCompile(`^-[0-9.]`)

// joinNegativeValues writes "--flag -1" as "--flag=-1" for every flag that
// takes a value, so that a negative number reaches the flag's own check
// ("--interval -1s: must be > 0") instead of kong reading it as a short
// flag.
func joinNegativeValues(parser *kong.Kong, args []string) []string {
	takesValue := map[string]bool{}
	for _, group := range parser.Model.AllFlags(false) {
		for _, f := range group {
			if !f.IsBool() && !f.IsCounter() {
				takesValue["--"+f.Name] = true
			}
		}
	}
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if takesValue[a] && i+1 < len(args) && negativeNumber.MatchString(args[i+1]) {
			out = append(out, a+"="+args[i+1])
			i++
			continue
		}
		out = append(out, a)
	}
	return out
}

// flagVars are the defaults the flag grammars name (${socket}, ...) where
// the package that applies them declares them: one value, not a copy in a
// struct tag.
func flagVars() kong.Vars {
	secs := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s" }
	followUps := make([]string, len(snapshot.DefaultFollowUps))
	for i, d := range snapshot.DefaultFollowUps {
		followUps[i] = secs(d)
	}
	return kong.Vars{"socket": defaultSocket, "log_dir": snapshot.DefaultDir, "follow_ups": strings.Join(followUps, ","),
		"crash_cooldown": secs(snapshot.DefaultCrashCooldown), "spike_cooldown": secs(snapshot.DefaultSpikeCooldown)}
}
