module github.com/gpu-telemetry/gpu-telemetry

go 1.26.8

require (
	github.com/NVIDIA/go-nvml v0.13.4-1 // indirect
	github.com/alecthomas/kong v1.17.0 // indirect
	github.com/coreos/go-systemd/v22 v22.7.0 // indirect
	github.com/gofrs/flock v0.13.2 // indirect
	golang.org/x/sys v0.50.0 // indirect
	gopkg.in/natefinch/lumberjack.v2 v2.2.1 // indirect
)
