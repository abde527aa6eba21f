package reading

import "strings"

// Workload is what a process's cgroup says of the job it belongs to: the
// systemd unit, a container, a Kubernetes pod, a Slurm job and step. Each
// field is empty where the cgroup does not say (a process outside any
// container has no container id); Known says whether the cgroup was read
// at all.
type Workload struct {
	Known       bool   // /proc/<pid>/cgroup was read
	Unit        string // innermost systemd unit: "slurmstepd.scope", "docker-<id>.scope", "session-3.scope", "foo.service"
	ContainerID string // 64 hex digits (Docker, containerd, CRI-O, Podman)
	PodUID      string // Kubernetes pod UID, with dashes
	SlurmJob    string // Slurm job id
	SlurmStep   string // Slurm step: a number, "batch", "extern" or "interactive"
}

// String names the workload in one line: "slurm job 4242 step 0", "pod
// <uid> container <id>", "container <id>", "unit foo.service", or "" when
// the cgroup says nothing of a job.
func (w Workload) String() string {
	var parts []string
	if w.SlurmJob != "" {
		s := "slurm job " + w.SlurmJob
		if w.SlurmStep != "" {
			s += " step " + w.SlurmStep
		}
		parts = append(parts, s)
	}
	if w.PodUID != "" {
		parts = append(parts, "pod "+w.PodUID)
	}
	if w.ContainerID != "" {
		parts = append(parts, "container "+shortID(w.ContainerID))
	}
	if len(parts) == 0 && w.Unit != "" {
		parts = append(parts, "unit "+w.Unit)
	}
	return strings.Join(parts, " ")
}

// shortID is a container id as docker ps shows it (12 digits).
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
