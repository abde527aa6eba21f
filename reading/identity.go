package reading

// Identity names the host in every output (metrics, events.log, snapshot
// headers, status) the same way: the name the operator gave (--host) or
// the hostname, the machine id (/etc/machine-id: stable across reboots and
// renames) and this boot's id. An id the host does not give is empty.
type Identity struct {
	Host      string
	MachineID string
	BootID    string
}
