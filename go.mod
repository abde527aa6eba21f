module github.com/gpu-telemetry/gpu-telemetry

go 1.26.8
