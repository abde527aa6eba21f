package kmsg

import "regexp"

// taskLine matches the kernel's lines about a task, which begin with the
// task's name (comm: at most 15 bytes, whatever the user named the
// program), then its pid: "<comm>[<pid>]: segfault at 0 ip ... in <file>[...]"
// (the file's name is the user's too), "<comm>/<pid>: potentially
// unexpected fatal signal 11". A user can name a program "NVRM: GPU0 " and
// its file "0000:41:00.0 has fallen off the bus": the kernel logs that line
// itself (facility 0) and it starts with the driver's prefix. No line of the
// driver has a pid in brackets, or after a slash, within its first 16
// bytes (its own lines go on "NVRM: Xid (PCI:...", "NVRM: GPU at PCI:...",
// "NVRM: GPU1 _kgsp...").
var taskLine = regexp.MustCompile(`^.{1,15}(\[[0-9]+\]|/[0-9]+)[: ]`)

// isTaskLine reports whether msg is a kernel line about a task that starts
// with its (user-chosen) name: never the driver's.
func isTaskLine(msg string) bool { return taskLine.MatchString(msg) }
