// Package kmsg reads the kernel log and picks NVIDIA Xid reports out of it,
// and the other lines that tell of a GPU failing: PCIe AER errors on the GPU
// or a bridge above it (ParseAER, matched to GPUs by AERPaths), and
// fallen-off-the-bus, RmInitAdapter and GSP timeout/crash lines (ParseNVRM).
//
// Reading is split from parsing: ParseRecord turns one /dev/kmsg record into a
// Record, and ParseDriverXid turns a message into an XidReport whose address
// is a reading.PCIAddr, comparable with NVML's bus id. Only a record the
// kernel logged (Record.FromKernel) whose message starts with the driver's
// "NVRM: " is the driver's: anyone can have text quoting it logged (a program
// name in a kernel warning, a USB product string, a write to /dev/kmsg from
// user space). ParseXid, for text a person pastes, finds an Xid anywhere. None of them does I/O, so they are tested (and fuzzed) on plain strings. The
// Reader does the I/O: it follows /dev/kmsg from its end (or, after a restart
// in the same boot, from the record after a saved sequence number), or a file
// or FIFO of records from its start, and hands each record to a callback.
//
// The package knows the kernel log and the text the NVIDIA driver prints, not
// NVML; what an Xid code means lives in package xid.
package kmsg
