package live

import (
	"strconv"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// ProcsDoc is a GPU's processes in the status document, from the slow
// tier's latest read. When the latest read hung or failed, Status says so
// and List is the last successful read's (ReadAt says when it was taken).
type ProcsDoc struct {
	Status string     `json:"status"` // ok, not available, failed, hung, not read yet
	Error  string     `json:"error,omitempty"`
	ReadAt *time.Time `json:"read_at"` // when List was read; null: never
	List   []ProcDoc  `json:"list"`
}

// ProcDoc is one process on a GPU.
type ProcDoc struct {
	PID      uint32  `json:"pid"`
	Type     string  `json:"type"` // compute, graphics, compute+graphics
	MemBytes *uint64 `json:"memory_bytes"`
	SMUtil   *uint32 `json:"sm_util_pct"`
	MemUtil  *uint32 `json:"memory_util_pct"`
	Origin   string  `json:"origin"` // here, exited, other PID namespace, unreadable
	Name     string  `json:"name,omitempty"`
	Cmdline  string  `json:"cmdline,omitempty"`
	Job      *JobDoc `json:"job,omitempty"` // from its cgroup; absent when not read
	// User is the owner's name, or the uid as text when it has none (or the
	// lookup did not answer in time); UID the real uid. Both absent unless
	// origin is "here".
	User string  `json:"user,omitempty"`
	UID  *uint32 `json:"uid,omitempty"`
}

// JobDoc is the job a process belongs to, from its cgroup; a field the
// cgroup does not give is empty.
type JobDoc struct {
	Unit        string `json:"unit"`
	ContainerID string `json:"container_id"`
	PodUID      string `json:"pod_uid"`
	SlurmJob    string `json:"slurm_job"`
	SlurmStep   string `json:"slurm_step"`
}

func jobDoc(w reading.Workload) *JobDoc {
	if !w.Known {
		return nil
	}
	return &JobDoc{Unit: w.Unit, ContainerID: w.ContainerID, PodUID: w.PodUID, SlurmJob: w.SlurmJob, SlurmStep: w.SlurmStep}
}

// Workload is the job again as the reading type (for its one-line name).
func (j *JobDoc) Workload() reading.Workload {
	if j == nil {
		return reading.Workload{}
	}
	return reading.Workload{Known: true, Unit: j.Unit, ContainerID: j.ContainerID, PodUID: j.PodUID, SlurmJob: j.SlurmJob, SlurmStep: j.SlurmStep}
}

// procsDoc converts a process read; nil stays nil (no reader).
func procsDoc(p *reading.Procs) *ProcsDoc {
	if p == nil {
		return nil
	}
	d := &ProcsDoc{Status: p.Status.String(), Error: p.Err, List: []ProcDoc{}}
	g := p.Good()
	if g == nil {
		return d
	}
	t := g.Time
	d.ReadAt = &t
	for _, pr := range g.List {
		d.List = append(d.List, ProcDoc{PID: pr.PID, Type: pr.Kind.String(), MemBytes: ptr(pr.MemBytes),
			SMUtil: ptr(pr.SMUtil), MemUtil: ptr(pr.MemUtil), Origin: pr.Origin.String(), Name: pr.Name, Cmdline: pr.Cmdline, Job: jobDoc(pr.Workload),
			User: pr.User, UID: ptr(pr.UID)})
	}
	return d
}

// ProcLines are a GPU's process lines on the status screen: one summary
// line, then one line per process (none when the GPU has no reader).
func ProcLines(g GPUDoc, now time.Time) []string {
	p := g.Processes
	if p == nil {
		return nil
	}
	head := "  processes: " + strconv.Itoa(len(p.List))
	switch {
	case p.ReadAt == nil:
		head = "  processes: no data (" + p.Status + orEmpty(p.Error) + ")"
	case p.Status != reading.ProcOK.String():
		head += " at " + clock(*p.ReadAt, now) + "; now no data (" + p.Status + orEmpty(p.Error) + ")"
	}
	out := []string{head}
	for _, pr := range p.List {
		who := "(" + pr.Origin + ")"
		if pr.Name != "" {
			who = pr.Name + ": " + pr.Cmdline
		}
		mem := na
		if pr.MemBytes != nil {
			mem = utoa(*pr.MemBytes>>20) + " MiB"
		}
		if j := pr.Job.Workload().String(); j != "" {
			who += "  [" + j + "]"
		}
		out = append(out, "    pid "+utoa(uint64(pr.PID))+" "+pr.Type+"  mem "+mem+"  sm "+OptUint(pr.SMUtil, "%")+
			" membusy "+OptUint(pr.MemUtil, "%")+"  "+who)
	}
	return out
}

func orEmpty(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}
