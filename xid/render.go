package xid

import (
	"strconv"
	"strings"
)

// Render is what `gpu-telemetry xid N` prints: everything the catalog and
// the decode of the line's text say about one report, one item per line.
func Render(e Explanation) string {
	var b strings.Builder
	b.WriteString(Describe(e.Code) + "\n")
	if !e.Known {
		b.WriteString("  what to do:         " + e.Action + "\n")
		return b.String()
	}
	line := func(k, v string) {
		if v == "" {
			v = "-"
		}
		b.WriteString("  " + k + strings.Repeat(" ", 20-len(k)) + v + "\n")
	}
	line("mnemonic:", e.Mnemonic)
	line("class:", e.Class.String())
	line("NVIDIA immediate:", e.Info.BucketOrNone())
	line("NVIDIA investigate:", e.Investigate)
	line("what happened:", e.Description)
	if e.Decode != "" {
		line("decoded:", e.Decode)
		if e.Bucket != e.Info.Bucket {
			line("NVIDIA for this:", e.BucketOrNone())
		}
	}
	line("what to do:", e.Action)
	return b.String()
}

// List is what `gpu-telemetry xid --list` prints: one line per code, with
// NVIDIA's immediate action and name.
func List() string {
	var b strings.Builder
	for _, c := range Codes() {
		in, _ := Lookup(c)
		code := strconv.Itoa(c)
		b.WriteString(strings.Repeat(" ", 3-len(code)) + code + "  " + in.BucketOrNone() +
			strings.Repeat(" ", max(1, 22-len(in.BucketOrNone()))) + in.Name + "\n")
	}
	return b.String()
}
