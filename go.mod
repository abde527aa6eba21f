module github.com/gpu-telemetry/gpu-telemetry

go 1.26.8

require (
	github.com/NVIDIA/go-nvml v0.13.4-1
	github.com/alecthomas/kong v1.17.0
	github.com/coreos/go-systemd/v22 v22.7.0
	github.com/gofrs/flock v0.13.2
	golang.org/x/sys v0.50.0
	gopkg.in/natefinch/lumberjack.v2 v2.2.1
)
