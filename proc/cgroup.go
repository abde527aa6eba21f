package proc

import (
	"cmp"
	"strings"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// parseCgroup reads a /proc/<pid>/cgroup file (cgroup v2's single
// "0::/path" line, or cgroup v1's "N:controllers:/path" lines, or both in
// hybrid mode) for the job the process belongs to. The unified (v2) path
// is read first; v1 paths fill in what it lacks (on v1 hosts Slurm and
// Kubernetes place the process in every controller's hierarchy alike).
func parseCgroup(b []byte) reading.Workload {
	w := reading.Workload{Known: true}
	var v1 []string
	for _, line := range strings.Split(string(b), "\n") {
		// hierarchy-ID:controller-list:cgroup-path; the path may hold ':'.
		id, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		ctrl, path, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		if id == "0" && ctrl == "" {
			fromPath(&w, path)
		} else {
			v1 = append(v1, path)
		}
	}
	for _, p := range v1 {
		fromPath(&w, p)
	}
	return w
}

// fromPath fills what w lacks from one cgroup path, reading its
// components from the innermost out.
func fromPath(w *reading.Workload, path string) {
	comps := strings.Split(strings.Trim(path, "/"), "/")
	unit, container, pod, job, step := "", "", "", "", ""
	for i := len(comps) - 1; i >= 0; i-- {
		c := comps[i]
		if unit == "" && (strings.HasSuffix(c, ".service") || strings.HasSuffix(c, ".scope")) {
			unit = c
		}
		if container == "" {
			container = containerID(c)
		}
		if pod == "" {
			pod = podUID(c)
		}
		if job == "" {
			if id, ok := strings.CutPrefix(c, "job_"); ok && id != "" && digits(id) {
				job = id
				// Slurm's layouts put the step right below the job:
				// .../job_<id>/step_<s>/...
				if i+1 < len(comps) {
					if s, ok := strings.CutPrefix(comps[i+1], "step_"); ok && s != "" {
						step = s
					}
				}
			}
		}
	}
	w.Unit = cmp.Or(w.Unit, unit)
	w.ContainerID = cmp.Or(w.ContainerID, container)
	w.PodUID = cmp.Or(w.PodUID, pod)
	if w.SlurmJob == "" {
		w.SlurmJob, w.SlurmStep = job, step
	}
}

// containerID finds a container id in one path component: the runtimes'
// systemd scopes (docker-<id>.scope, cri-containerd-<id>.scope,
// crio-<id>.scope, libpod-<id>.scope) or, under the cgroupfs driver, the
// bare id (/docker/<id>, /kubepods/burstable/pod<uid>/<id>).
func containerID(c string) string {
	c = strings.TrimSuffix(c, ".scope")
	if i := strings.LastIndexAny(c, "-"); i >= 0 {
		prefix := c[:i]
		if strings.HasSuffix(prefix, "conmon") {
			return "" // CRI-O's monitor process, not the container
		}
		c = c[i+1:]
	}
	if len(c) == 64 && hex(c) {
		return c
	}
	return ""
}

// podUID finds a Kubernetes pod UID in one path component: "pod<uid>"
// alone (cgroupfs driver, dashes) or in a systemd slice name
// (kubepods-burstable-pod<uid>.slice, with underscores for the dashes).
func podUID(c string) string {
	c = strings.TrimSuffix(c, ".slice")
	i := strings.LastIndex(c, "pod")
	if i < 0 || i > 0 && c[i-1] != '-' {
		return ""
	}
	uid := strings.ReplaceAll(c[i+3:], "_", "-")
	if len(uid) != 36 || !hex(strings.ReplaceAll(uid, "-", "")) || strings.Count(uid, "-") != 4 {
		return ""
	}
	return uid
}

// hex reports whether s is lower-case hexadecimal digits, at least one.
func hex(s string) bool { return s != "" && strings.Trim(s, "0123456789abcdef") == "" }

// digits reports whether s is decimal digits, at least one.
func digits(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }
