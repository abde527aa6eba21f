package reading

import "testing"

func TestWorkloadString(t *testing.T) {
	for _, c := range []struct {
		w    Workload
		want string
	}{
		{Workload{Known: true, Unit: "slurmstepd.scope", SlurmJob: "4242", SlurmStep: "0"}, "slurm job 4242 step 0"},
		{Workload{Known: true, ContainerID: "4f1d2b3c5e6a7980a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718", PodUID: "0e3a1f2c-4b5d-4c6e-8f70-123456789abc"},
			"pod 0e3a1f2c-4b5d-4c6e-8f70-123456789abc container 4f1d2b3c5e6a"},
		{Workload{Known: true, Unit: "train.service"}, "unit train.service"},
		{Workload{Known: true}, ""},
	} {
		if got := c.w.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.w, got, c.want)
		}
	}
}
