package proc

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

const (
	ctr = "4f1d2b3c5e6a7980a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718"
	pod = "0e3a1f2c-4b5d-4c6e-8f70-123456789abc"
)

// cgroupCases are /proc/<pid>/cgroup files as the kernel writes them under
// each layout the fleet runs: cgroup v2 (one "0::" line), v1 (a line per
// hierarchy) and hybrid (both).
var cgroupCases = []struct {
	name, file string
	want       reading.Workload
}{
	{"slurm, cgroup v2", "0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n",
		reading.Workload{Unit: "slurmstepd.scope", SlurmJob: "4242", SlurmStep: "0"}},
	{"slurm, cgroup v2, node-named scope, batch step", "0::/system.slice/gpu-node-07_slurmstepd.scope/job_4242/step_batch/user/task_0\n",
		reading.Workload{Unit: "gpu-node-07_slurmstepd.scope", SlurmJob: "4242", SlurmStep: "batch"}},
	{"slurm, cgroup v1", "12:pids:/slurm/uid_1000/job_77/step_3/task_0\n11:memory:/slurm/uid_1000/job_77/step_3/task_0\n" +
		"10:devices:/slurm/uid_1000/job_77/step_3\n5:cpu,cpuacct:/slurm/uid_1000/job_77/step_3/task_0\n1:name=systemd:/system.slice/slurmd.service\n",
		reading.Workload{Unit: "slurmd.service", SlurmJob: "77", SlurmStep: "3"}},
	{"slurm, hybrid (v1 controllers, v2 root)", "5:cpuset:/slurm/uid_0/job_9/step_extern\n1:name=systemd:/system.slice/slurmd.service\n0::/\n",
		reading.Workload{Unit: "slurmd.service", SlurmJob: "9", SlurmStep: "extern"}},
	{"kubernetes, systemd driver, containerd, v2",
		"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0e3a1f2c_4b5d_4c6e_8f70_123456789abc.slice/cri-containerd-" + ctr + ".scope\n",
		reading.Workload{Unit: "cri-containerd-" + ctr + ".scope", ContainerID: ctr, PodUID: pod}},
	{"kubernetes, cgroupfs driver, v1", "11:memory:/kubepods/besteffort/pod" + pod + "/" + ctr + "\n3:devices:/kubepods/besteffort/pod" + pod + "/" + ctr + "\n",
		reading.Workload{ContainerID: ctr, PodUID: pod}},
	{"kubernetes, guaranteed pod, CRI-O", "0::/kubepods.slice/kubepods-pod0e3a1f2c_4b5d_4c6e_8f70_123456789abc.slice/crio-" + ctr + ".scope\n",
		reading.Workload{Unit: "crio-" + ctr + ".scope", ContainerID: ctr, PodUID: pod}},
	{"CRI-O's conmon is no container", "0::/kubepods.slice/kubepods-pod0e3a1f2c_4b5d_4c6e_8f70_123456789abc.slice/crio-conmon-" + ctr + ".scope\n",
		reading.Workload{Unit: "crio-conmon-" + ctr + ".scope", PodUID: pod}},
	{"docker, v2", "0::/system.slice/docker-" + ctr + ".scope\n",
		reading.Workload{Unit: "docker-" + ctr + ".scope", ContainerID: ctr}},
	{"docker, cgroupfs, v1", "4:memory:/docker/" + ctr + "\n",
		reading.Workload{ContainerID: ctr}},
	{"a service", "0::/system.slice/train.service\n", reading.Workload{Unit: "train.service"}},
	{"a login session", "0::/user.slice/user-1000.slice/session-3.scope\n", reading.Workload{Unit: "session-3.scope"}},
	{"a path with a colon", "0::/system.slice/weird:name.service\n", reading.Workload{Unit: "weird:name.service"}},
	{"job_ without a number is no Slurm job", "0::/system.slice/job_abc/step_0\n", reading.Workload{}},
	{"empty", "", reading.Workload{}},
}

func TestParseCgroup(t *testing.T) {
	for _, c := range cgroupCases {
		t.Run(c.name, func(t *testing.T) {
			want := c.want
			want.Known = true
			if got := parseCgroup([]byte(c.file)); got != want {
				t.Errorf("parseCgroup:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

// TestDescribeReadsWorkload: on a fake /proc tree, each process on the
// GPU is given the job its cgroup file names; one that has no cgroup file
// left (exited between the reads of its files) keeps its name with an
// unknown workload, and one in another PID namespace gets neither.
func TestDescribeReadsWorkload(t *testing.T) {
	root := testutil.FakeProc(t, true, map[int][2]string{
		100: {"python3", "python3\x00train.py"},
		200: {"pt_main_thread", "torchrun"},
		300: {"gone", "gone"},
	})
	for pid, file := range map[string]string{"100": cgroupCases[0].file, "200": cgroupCases[4].file} {
		if err := os.WriteFile(filepath.Join(root, pid, "cgroup"), []byte(file), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := describeAt(NewDescriber(root), time.Now(), 100, 200, 300)
	w := map[uint32]reading.Workload{}
	for _, pr := range got {
		w[pr.PID] = pr.Workload
	}
	if w[100].SlurmJob != "4242" || w[100].SlurmStep != "0" || !w[100].Known {
		t.Errorf("pid 100 (slurm): %+v", w[100])
	}
	if w[200].PodUID != pod || w[200].ContainerID != ctr {
		t.Errorf("pid 200 (pod): %+v", w[200])
	}
	if w[300].Known {
		t.Errorf("pid 300 (no cgroup file): %+v, want unknown", w[300])
	}

	other := testutil.FakeProc(t, false, map[int][2]string{100: {"python3", "python3"}})
	os.WriteFile(filepath.Join(other, "100", "cgroup"), []byte(cgroupCases[0].file), 0o644)
	if got := describeAt(NewDescriber(other), time.Now(), 100); got[0].Workload.Known {
		t.Errorf("another PID namespace: %+v, want no workload (its PIDs are not ours)", got[0].Workload)
	}
}
