package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/alecthomas/kong"
)

// command is one subcommand: run dispatches on its name, the top-level help
// lists it and the man page documents it, all from this table.
type command struct {
	name        string
	args        string     // what follows the name in a usage line
	summary     string     // one line for the top-level help
	description string     // its own help's description (the man page's too)
	grammar     func() any // its kong flags, for the man page; nil: none (xid parses its own)
	run         func(args []string, stdout, stderr io.Writer) int
}

// commands are the subcommands in the order the help lists them; running
// the logger (flags only, no command) is the default. help is dispatched by
// run itself (it reads this table).
var commands = []command{
	{"status", "[--json] [--socket PATH]", "Every GPU's state from the running logger; a monitoring check.",
		statusDescription, func() any { return &StatusCLI{} }, runStatus},
	{"check", "[--format nagios|nhc|npd|json] [--action A] [--socket PATH]", "Does a GPU need a repair action: for Nagios, NHC, Slurm, node-problem-detector.",
		checkDescription, func() any { return &CheckCLI{} }, runCheck},
	{"top", "[--socket PATH]", "Full-screen live view of every GPU from the running logger.",
		topDescription, func() any { return &TopCLI{} }, runTop},
	{"ack", "GPU --action ACTION [--note TEXT] [--socket PATH]", "Acknowledge a GPU's repair action once it is done (root).",
		ackDescription, func() any { return &AckCLI{} }, runAck},
	{"report", "[--log-dir DIR] [--last | --at TIME | --incident FILE] [--html FILE]", "The story of an incident, from the logger's files.",
		reportDescription, func() any { return &ReportCLI{} }, runReport},
	{"xid", "N [TEXT] | LINE | --list", "What an Xid means and what to do; decodes kernel log lines.",
		xidUsage, nil, runXid},
	{"probe", "[--interval D] [--gpu SEL] [--calls N]", "What each NVML call costs here: run it before choosing --interval.",
		probeDescription, func() any { return &ProbeCLI{} }, runProbe},
	{"fan-guard", "release [--log-dir DIR] [--all]", "Hand the fans the fan guard holds back to the firmware (for a killed logger).",
		fanGuardDescription, func() any { return &FanGuardCLI{} }, runFanGuard},
	{"help", "[COMMAND]", "Show this help, or a command's.", "", nil, nil},
}

// lookupCommand returns the command named name.
func lookupCommand(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// commandNames lists the commands for messages ("status, top, ...").
func commandNames() string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}

// loggerDescription is what the logger's help says it does.
const loggerDescription = "Records NVIDIA GPU telemetry every 100 ms and captures crash forensics (Xid, GSP faults, hangs). " +
	"With no command it runs the logger (the systemd service's command line); the commands below ask the running logger, " +
	"read its files or look things up."

// loggerUsage is the top-level help's first lines.
const loggerUsage = "Usage: gpu-telemetry [flags]                 run the logger\n" +
	"       gpu-telemetry <command> [flags]       see Commands below\n"

// topHelp prints the top-level help: the usage lines, kong's description
// and flags, then the commands.
func topHelp(options kong.HelpOptions, ctx *kong.Context) error {
	fmt.Fprint(ctx.Stdout, loggerUsage)
	options.NoAppSummary = true
	if err := kong.DefaultHelpPrinter(options, ctx); err != nil {
		return err
	}
	fmt.Fprint(ctx.Stdout, commandsHelp())
	return nil
}

// commandsHelp is the top-level help's list of commands.
func commandsHelp() string {
	var b strings.Builder
	b.WriteString("\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-8s %s\n", c.name, c.summary)
	}
	b.WriteString("\nRun \"gpu-telemetry <command> --help\" for a command's flags.\n")
	return b.String()
}

// runHelp runs `gpu-telemetry help [COMMAND]`.
func runHelp(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		return run([]string{"--help"}, stdout, stderr)
	case len(args) > 1:
		fmt.Fprintf(stderr, "gpu-telemetry help: one command at most (commands: %s)\n", commandNames())
		return 2
	}
	if args[0] == "--help" || args[0] == "-h" { // help's own help, as every command has
		args = []string{"help"}
	}
	c, ok := lookupCommand(args[0])
	if !ok {
		fmt.Fprintf(stderr, "gpu-telemetry help: unknown command %q (commands: %s)\n", args[0], commandNames())
		return 2
	}
	if c.run == nil { // help help
		return run([]string{"--help"}, stdout, stderr)
	}
	return c.run([]string{"--help"}, stdout, stderr)
}
