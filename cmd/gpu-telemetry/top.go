package main

import "io"

// runTop is replaced by the full-screen view.
func runTop(args []string, stderr io.Writer) int {
	io.WriteString(stderr, "gpu-telemetry top: not built yet\n")
	return 3
}
