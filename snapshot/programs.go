package snapshot

import "os/exec"

// Program is a program the snapshots or the boot log run, and where an
// operator gets it.
type Program struct {
	Name    string // as run: looked up in PATH
	Package string // the Debian package that provides it; "" when no Debian package of ours can
	Source  string // where it comes from when Package is ""
}

// Programs is every program this package runs, each with what provides it:
// a missing one is named with its package, once in the log and in each
// file that lacks its output ("lspci: not installed (Debian package
// pciutils)"). deploy/deb/control recommends or suggests each package that
// is not Essential (test/deb checks it against this table).
var Programs = []Program{
	{Name: "dmesg", Package: "util-linux"}, // Essential: on every Debian system
	{Name: "journalctl", Package: "systemd"},
	{Name: "lspci", Package: "pciutils"},
	{Name: "setpci", Package: "pciutils"},
	{Name: "free", Package: "procps"},
	{Name: "uptime", Package: "procps"},
	// Installed with NVIDIA's driver (NVIDIA's packages or its .run
	// installer); no dependency of ours could name the right one.
	{Name: "nvidia-smi", Source: "NVIDIA's driver"},
}

// NotInstalledError is returned, by ExecRunner, for a program that is not in
// PATH. It matches exec.ErrNotFound with errors.Is.
type NotInstalledError struct {
	Name string // the program
}

// Error names the program and what provides it: "lspci: not installed
// (Debian package pciutils)".
func (e *NotInstalledError) Error() string {
	for _, p := range Programs {
		if p.Name != e.Name {
			continue
		}
		if p.Package != "" {
			return e.Name + ": not installed (Debian package " + p.Package + ")"
		}
		return e.Name + ": not installed (it comes with " + p.Source + ")"
	}
	return e.Name + ": not installed"
}

// Unwrap makes errors.Is(err, exec.ErrNotFound) true.
func (e *NotInstalledError) Unwrap() error { return exec.ErrNotFound }
