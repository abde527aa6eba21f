package xid

import "strconv"

// Advice shared by several codes, in our words. Each follows the code's
// immediate-action bucket in NVIDIA's catalog; the bucket itself is kept in
// Info.Bucket so a reader can check it against the catalog.
const (
	actRestartApp   = "Restart the application; if it keeps recurring, collect nvidia-bug-report.sh and contact support."
	actCheckApp     = "Restart the application; the application or its CUDA version most likely sent bad work (the pid names it); report it as a driver issue only if the application is known good."
	actResetGPU     = "Reset the GPU (nvidia-smi -r, or reboot) before running work on it again; contact support if it recurs."
	actGSP          = "Reset the GPU now; power-cycle the node if it persists; collect nvidia-bug-report.sh and follow NVIDIA's GPU debug guidelines if it comes back after a power cycle."
	actIgnore       = "Nothing to do for the GPU now; contact support if it keeps recurring."
	actNVLink5      = "Decided by the interrupt and status fields on the line (NVIDIA's Xid 144-150 decode): see decode= for this line. If they cannot be decoded, follow the Xid 154 that comes with it (R565 and later); without one, treat a line marked Fatal as needing a GPU reset."
	descNVLink5Unit = "An NVLink 5 unit reported an error; how bad it is depends on the interrupt info and error status printed in parentheses on the line."
	descNoBucket    = " NVIDIA's catalog gives no resolution bucket for it."
	actNoBucket     = "NVIDIA gives no immediate action for this Xid: do what the Xid 154 that comes with it says (the GPU's recovery action); with no Xid 154, collect nvidia-bug-report.sh and report it."
)

// engine builds the entry of a video, JPEG, optical-flow or copy engine
// exception: all restart the application, all ask for support if they recur.
func engine(mnemonic, name, unit string) Info {
	return Info{
		Mnemonic:    mnemonic,
		Name:        name,
		Bucket:      "RESTART_APP",
		Investigate: "CONTACT_SUPPORT",
		Description: "The " + unit + " raised an exception while running the application's work.",
		Action:      actRestartApp,
		Class:       ClassApplication,
	}
}

// copyEngine is engine for copy engine n (Xid 39-41, 70-72, 75-77, 85, 126-135).
func copyEngine(n int) Info {
	name := "CE" + strconv.Itoa(n) + ": Unknown Error"
	if n <= 2 {
		name = "Copy Engine Exception"
	}
	return engine("ROBUST_CHANNEL_CE"+strconv.Itoa(n)+"_ERROR", name, "copy engine CE"+strconv.Itoa(n))
}

func nvdec(n int) Info {
	name := "NVDEC" + strconv.Itoa(n) + " Error"
	if n == 0 {
		name = "NVDEC0 Exception"
	}
	return engine("ROBUST_CHANNEL_NVDEC"+strconv.Itoa(n)+"_ERROR", name, "video decoder NVDEC"+strconv.Itoa(n))
}

func nvjpg(n int) Info {
	return engine("ROBUST_CHANNEL_NVJPG"+strconv.Itoa(n)+"_ERROR", "NVJPG"+strconv.Itoa(n)+" Error", "JPEG decoder NVJPG"+strconv.Itoa(n))
}

// catalog maps an Xid code to its entry; Code is filled in by Lookup. It holds
// every code NVIDIA's catalog marks as applying to H100, B100 or GB200 (see
// hopperBlackwell in the tests), Xid 74 and 93 for A100/H100, and Xid 61,
// which older drivers printed and the catalog now lists as unused.
var catalog = map[int]Info{
	8: {
		Mnemonic: "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", Name: "GPU stopped processing",
		Bucket: "RESTART_APP", Investigate: "CONTACT_SUPPORT",
		Description: "A channel stopped making progress and the driver timed it out.",
		Action:      actRestartApp,
		Class:       ClassApplication,
	},
	11: {
		Mnemonic: "ROBUST_CHANNEL_GR_ERROR_MISSING_HW", Name: "Invalid or corrupted push buffer stream",
		Bucket: "RESTART_APP", Investigate: "CHECK_APP/CUDA",
		Description: "The graphics engine was asked to use hardware it does not have: the command stream was invalid or corrupted.",
		Action:      actCheckApp,
		Class:       ClassApplication,
	},
	13: {
		Mnemonic: "ROBUST_CHANNEL_GR_EXCEPTION", Name: "Graphics Engine Exception",
		Bucket: "RESTART_APP", Investigate: "WORKFLOW_XID_13",
		Description: "The graphics/compute engine faulted on the application's work: usually an out-of-bounds access or illegal instruction, sometimes failing hardware.",
		Action:      "Restart the application. Repeated on the same GPU (same TPC/GPC) with known-good code, it points at hardware: run DCGM diagnostics (dcgmi diag -r 3), then field diagnostics, then report it. A single fault, or faults spread over GPUs, points at the application: debug it (compute-sanitizer, cuda-gdb).",
		Class:       ClassApplication,
	},
	14: {
		Mnemonic: "ROBUST_CHANNEL_FAKE_ERROR", Name: "Unused",
		Bucket: "IGNORE", Investigate: "CONTACT_SUPPORT",
		Description: "A fake error injected from user space (error injection testing).",
		Action:      "Nothing: someone injected it; find out who if it was not planned.",
		Class:       ClassInformational,
	},
	25: {
		Mnemonic: "ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY", Name: "Invalid or illegal push buffer stream",
		Bucket: "RESTART_APP", Investigate: "CHECK_APP/CUDA",
		Description: "The graphics engine received an illegal notify request in the application's command stream.",
		Action:      actCheckApp,
		Class:       ClassApplication,
	},
	31: {
		Mnemonic: "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", Name: "GPU memory page fault",
		Bucket: "RESTART_APP", Investigate: "WORKFLOW_XID_31",
		Description: "The GPU's MMU reported an illegal address access; usually an application bug, sometimes a driver or hardware bug.",
		Action:      "Restart the application. Repeated MMU faults on the same GPU (same PCI address) with known-good code point at hardware: run DCGM diagnostics (dcgmi diag -r 3), then field diagnostics, then report it. Faults spread over GPUs, or a single one, point at the application: debug it (compute-sanitizer, cuda-gdb).",
		Class:       ClassApplication,
	},
	32: {
		Mnemonic: "ROBUST_CHANNEL_PBDMA_ERROR", Name: "Invalid or corrupted push buffer stream",
		Bucket: "RESTART_APP", Investigate: "CHECK_APP/CUDA",
		Description: "The DMA controller that feeds the GPU its command stream over PCIe reported a fault; mostly PCIe signal quality, rarely the application.",
		Action:      "Restart the application; check PCIe link health (AER errors, replay counters) if it recurs.",
		Class:       ClassHardware,
	},
	37: {
		Mnemonic: "ROBUST_CHANNEL_FECS_ERR_UNIMP_FIRMWARE_METHOD", Name: "Driver firmware error",
		Bucket: "IGNORE", Investigate: "CHECK_APP/CUDA",
		Description: "The context-switch firmware (FECS) was sent a method it does not implement.",
		Action:      "Nothing for the GPU now; if it recurs, check the application and its CUDA version.",
		Class:       ClassDriver,
	},
	38: {
		Mnemonic: "ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT", Name: "Driver firmware error",
		Bucket: "IGNORE", Investigate: "CONTACT_SUPPORT",
		Description: "The context-switch firmware (FECS) watchdog timed out.",
		Action:      actIgnore,
		Class:       ClassDriver,
	},
	39: copyEngine(0),
	40: copyEngine(1),
	41: copyEngine(2),
	43: {
		Mnemonic: "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", Name: "GPU stopped processing",
		Bucket: "IGNORE", Investigate: "CONTACT_SUPPORT",
		Description: "An application hit a software-induced fault and was terminated; the GPU stays healthy.",
		Action:      "Nothing for the GPU; look at the application.",
		Class:       ClassApplication,
	},
	44: {
		Mnemonic: "ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW", Name: "Graphics Engine fault during context switch",
		Bucket: "IGNORE", Investigate: "CONTACT_SUPPORT",
		Description: "The graphics engine faulted while switching between contexts.",
		Action:      actIgnore,
		Class:       ClassDriver,
	},
	45: {
		Mnemonic: "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", Name: "Preemptive cleanup, due to previous errors",
		Bucket: "WORKFLOW_XID_45", Investigate: "Solo: RESTART_FM; Not Solo: IGNORE",
		Description: "The driver tore down an application's GPU channels: after an earlier Xid, or because the application was killed (Ctrl-C, SIGKILL, GPU reset).",
		Action:      "With other Xids: follow those, this one is their consequence. Alone (no other Xid around it): restart Fabric Manager (systemctl restart nvidia-fabricmanager).",
		Class:       ClassInformational,
	},
	46: {
		Mnemonic: "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", Name: "GPU stopped processing",
		Bucket: "RESET_GPU", Investigate: "CONTACT_SUPPORT",
		Description: "The GPU stopped processing work and the driver timed it out.",
		Action:      actResetGPU,
		Class:       ClassDriver,
	},
	48: {
		Mnemonic: "ROBUST_CHANNEL_GPU_ECC_DBE", Name: "Double Bit ECC Error",
		Bucket: "WORKFLOW_XID_48", Investigate: "WORKFLOW_XID_48",
		Description: "The GPU detected an uncorrectable (double-bit) memory error and reported it to the application.",
		Action:      "Alone: reset the GPU. With Xid 63 or 64: drain the GPU's jobs, then reset it. Follow up with field diagnostics; for an SRAM error (not \"framebuffer\") check the SRAM error threshold flag (nvidia-smi -q -d ECC) and run field diagnostics if it is set.",
		Class:       ClassMemory,
	},
	54: {
		Mnemonic: "SILENT_RUNNING_PWR_REDUCED_CLOCKING", Name: "Auxiliary power is not connected to the GPU board",
		Bucket: "CHECK_MECHANICALS", Investigate: "CONTACT_SUPPORT",
		Description: "The board's auxiliary power is missing, so the GPU runs at reduced clocks.",
		Action:      "Check the GPU's seating and its power connectors; contact support if they are in order.",
		Class:       ClassHardware,
	},
	60: {
		Mnemonic: "ROBUST_CHANNEL_SEC2_ERROR", Name: "Video processor exception",
		Bucket: "RESTART_APP", Investigate: "INVESTIGATE_SW",
		Description: "The SEC2 engine raised an exception while running the application's work.",
		Action:      "Restart the application; if it recurs, investigate the software that used the engine (the pid names it).",
		Class:       ClassApplication,
	},
	61: {
		Mnemonic: "PMU_BREAKPOINT", Name: "Internal micro-controller breakpoint/warning",
		Bucket: "CONTACT_SUPPORT", Investigate: "",
		Description: "An on-GPU micro-controller hit a breakpoint or raised a warning (older drivers; the current catalog lists this code as unused).",
		Action:      "Contact support if it recurs.",
		Class:       ClassDriver,
	},
	62: {
		Mnemonic: "PMU_HALT_ERROR", Name: "Internal micro-controller halt",
		Bucket: "RESET_GPU", Investigate: "CONTACT_SUPPORT",
		Description: "An on-GPU micro-controller halted (a firmware crash); on GSP systems it is often followed by Xid 45, 119 and 154.",
		Action:      actResetGPU,
		Class:       ClassDriver,
	},
	63: {
		Mnemonic: "INFOROM_DRAM_RETIREMENT_EVENT", Name: "GPU memory remapping event",
		Bucket: "IGNORE", Investigate: "IGNORE",
		Description: "The GPU handled an ECC memory error by marking a row for remapping (a page for retirement on older GPUs).",
		Action:      "Nothing now; reset the GPU when convenient to apply the remap, and watch the rate (nvidia-smi -q -d ROW_REMAPPER).",
		Class:       ClassMemory,
	},
	64: {
		Mnemonic: "INFOROM_DRAM_RETIREMENT_FAILURE", Name: "GPU memory remapping failure",
		Bucket: "RESET_GPU", Investigate: "CONTACT_SUPPORT",
		Description: "The GPU could not remap a row (or retire a page) after an ECC memory error.",
		Action:      "Reset the GPU; contact support (RMA check) if it recurs.",
		Class:       ClassMemory,
	},
	66: {
		Mnemonic: "ROBUST_CHANNEL_FECS_ERR_REG_ACCESS_VIOLATION", Name: "Illegal access by driver",
		Bucket: "IGNORE", Investigate: "INVESTIGATE_SW",
		Description: "The context-switch firmware saw an illegal register access.",
		Action:      "Nothing for the GPU now; if it recurs, investigate the software involved (application or driver).",
		Class:       ClassDriver,
	},
	67: {
		Mnemonic: "ROBUST_CHANNEL_FECS_ERR_VERIF_VIOLATION", Name: "Illegal access by driver",
		Bucket: "IGNORE", Investigate: "CONTACT_SUPPORT",
		Description: "The context-switch firmware saw a verification violation.",
		Action:      actIgnore,
		Class:       ClassDriver,
	},
	68: nvdec(0),
	69: {
		Mnemonic: "ROBUST_CHANNEL_GR_CLASS_ERROR", Name: "Graphics Engine class error",
		Bucket: "RESTART_APP", Investigate: "CHECK_APP/CUDA",
		Description: "The graphics engine rejected an invalid class or method in the application's command stream.",
		Action:      actCheckApp,
		Class:       ClassApplication,
	},
	70: copyEngine(3),
	71: copyEngine(4),
	72: copyEngine(5),
	74: {
		Mnemonic: "NVLINK_ERROR", Name: "NVLINK Error",
		Bucket: "WORKFLOW_NVLINK_ERR", Investigate: "CONTACT_SUPPORT",
		Description: "The GPU found a problem on an NVLink connection to another GPU or NVSwitch; the fault may be the link or the device at the other end.",
		Action:      "Reset the GPU or reboot; which error bits are set in the hex fields decides how serious it is (NVIDIA's WORKFLOW_NVLINK_ERR); check links with nvidia-smi nvlink; contact the vendor if a reset does not clear it.",
		Class:       ClassInterconnect,
	},
	75: copyEngine(6),
	76: copyEngine(7),
	77: copyEngine(8),
	78: {
		Mnemonic: "VGPU_START_ERROR", Name: "vGPU Start Error",
		Bucket: "UPDATE_SWFW", Investigate: "UPDATE_SWFW",
		Description: "A vGPU could not start: the guest driver does not match the host driver, or the vGPU type does not suit the guest.",
		Action:      "Update the host and guest drivers and firmware to matching versions; check the vGPU type.",
		Class:       ClassDriver,
	},
	79: {
		Mnemonic: "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", Name: "GPU has fallen off the bus",
		Bucket: "RESTART_BM", Investigate: "CONTACT_SUPPORT",
		Description: "The driver could not reach the GPU over PCIe: the link went down, most often a PCIe, power or GPU hardware failure.",
		Action:      "Reboot the node (cold if needed); check PCIe, power, cooling and the system event log.",
		Class:       ClassHardware,
	},
	80: {
		Mnemonic: "PBDMA_PUSHBUFFER_CRC_MISMATCH", Name: "Corrupted data sent to GPU",
		Bucket: "RESTART_APP", Investigate: "CHECK_APP/CUDA",
		Description: "The command stream arrived with a CRC mismatch: it was corrupted on its way to the GPU.",
		Action:      "Restart the application; check PCIe link health and the application if it recurs.",
		Class:       ClassHardware,
	},
	82: nvjpg(0),
	83: nvdec(1),
	84: nvdec(2),
	85: copyEngine(9),
	86: engine("ROBUST_CHANNEL_OFA0_ERROR", "OFA Exception", "optical flow accelerator OFA0"),
	88: nvdec(3),
	89: nvdec(4),
	92: {
		Mnemonic: "EXCESSIVE_SBE_INTERRUPTS", Name: "High single-bit ECC error rate",
		Bucket: "IGNORE", Investigate: "CONTACT_SUPPORT",
		Description: "The GPU is correcting single-bit ECC memory errors at a high rate.",
		Action:      "Nothing now; contact support if it persists.",
		Class:       ClassMemory,
	},
	93: {
		Mnemonic: "INFOROM_ERASE_LIMIT_EXCEEDED", Name: "Non-fatal violation of provisioned InfoROM wear limit",
		Bucket: "IGNORE", Investigate: "CONTACT_SUPPORT",
		Description: "The driver could not update the InfoROM because the wear limit set with nvflash was reached (A100).",
		Action:      "Nothing for running work; clear the limit with nvflash --elsessionclear if InfoROM updates are needed, and report it if that does not help.",
		Class:       ClassInformational,
	},
	94: {
		Mnemonic: "ROBUST_CHANNEL_CONTAINED_ERROR", Name: "Contained memory error",
		Bucket: "RESTART_APP", Investigate: "IGNORE (sympathetic)",
		Description: "An uncorrectable memory error was contained to one application, which must restart; other applications are unaffected.",
		Action:      "Restart the affected application; reset the GPU when convenient.",
		Class:       ClassMemory,
	},
	95: {
		Mnemonic: "ROBUST_CHANNEL_UNCONTAINED_ERROR", Name: "Uncontained memory error",
		Bucket: "RESET_GPU", Investigate: "IGNORE (sympathetic)",
		Description: "An uncorrectable memory error could not be contained and may affect every application on the GPU.",
		Action:      "Reset the GPU before running work on it again.",
		Class:       ClassMemory,
	},
	96:  nvdec(5),
	97:  nvdec(6),
	98:  nvdec(7),
	99:  nvjpg(1),
	100: nvjpg(2),
	101: nvjpg(3),
	102: nvjpg(4),
	103: nvjpg(5),
	104: nvjpg(6),
	105: nvjpg(7),
	106: {
		Mnemonic: "SMBPBI_TEST_MESSAGE", Name: "SMBPBI Test Message",
		Bucket: "IGNORE", Investigate: "IGNORE",
		Description: "A test message sent through the out-of-band management interface (SMBPBI).",
		Action:      "Nothing.",
		Class:       ClassInformational,
	},
	107: {
		Mnemonic: "SMBPBI_TEST_MESSAGE_SILENT", Name: "SMBPBI Test Message Silent",
		Bucket: "IGNORE", Investigate: "IGNORE",
		Description: "A silent test message sent through the out-of-band management interface (SMBPBI).",
		Action:      "Nothing.",
		Class:       ClassInformational,
	},
	108: {
		Mnemonic: "NVLINK_REMOTE_TRANSLATION_ERROR", Name: "Unused",
		Bucket: "IGNORE", Investigate: "XID_137_FLOW",
		Description: "An NVLink remote translation error; the catalog lists the code as unused.",
		Action:      "Nothing for the GPU; if it appears, debug the application as for Xid 137.",
		Class:       ClassApplication,
	},
	109: {
		Mnemonic: "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", Name: "Context Switch Timeout Error",
		Bucket: "RESET_GPU", Investigate: "CONTACT_SUPPORT",
		Description: "The GPU timed out switching between contexts.",
		Action:      actResetGPU,
		Class:       ClassDriver,
	},
	110: {
		Mnemonic: "SEC_FAULT_ERROR", Name: "Security Fault Error",
		Bucket: "RESET_GPU", Investigate: "INVESTIGATE_SW",
		Description: "The GPU reported a security fault; uncommon unless hardware has failed.",
		Action:      "Undo recent hardware changes and cold-reset the system; contact the vendor if it persists.",
		Class:       ClassHardware,
	},
	119: {
		Mnemonic: "GSP_RPC_TIMEOUT", Name: "GSP RPC Timeout",
		Bucket: "RESET_GPU", Investigate: "INVESTIGATE_SW",
		Description: "The driver timed out waiting for the GPU System Processor (GSP) firmware to answer an RPC: the GSP is hung or has crashed.",
		Action:      actGSP,
		Class:       ClassDriver,
	},
	120: {
		Mnemonic: "GSP_ERROR", Name: "GSP Error",
		Bucket: "RESET_GPU", Investigate: "INVESTIGATE_SW",
		Description: "Code running on the GPU System Processor (GSP) reported an error.",
		Action:      actGSP,
		Class:       ClassDriver,
	},
	121: {
		Mnemonic: "C2C_ERROR", Name: "C2C Error",
		Bucket: "IGNORE", Investigate: "CONTACT_SUPPORT",
		Description: "The driver saw corrected errors on the C2C NVLink to a Grace CPU; they have no operational impact.",
		Action:      "Nothing now; reset the GPU at a service window to retrain the link.",
		Class:       ClassInterconnect,
	},
	126: copyEngine(10),
	127: copyEngine(11),
	128: copyEngine(12),
	129: copyEngine(13),
	130: copyEngine(14),
	131: copyEngine(15),
	132: copyEngine(16),
	133: copyEngine(17),
	134: copyEngine(18),
	135: copyEngine(19),
	136: {
		Mnemonic: "ALI_TRAINING_FAIL", Name: "Link Training Failed",
		Bucket: "RESET_GPU", Investigate: "INVESTIGATE_LINK_SI",
		Description: "An NVLink failed to train (autonomous link initialization) on a Hopper GPU.",
		Action:      "Reset the GPU; if the link fails to train again, have the link's signal integrity (cables, connectors, seating) checked.",
		Class:       ClassInterconnect,
	},
	137: {
		Mnemonic: "NVLINK_PRIV_ERR", Name: "NVLink Privilege Error",
		Bucket: "IGNORE", Investigate: "XID_137_FLOW",
		Description: "The remote MMU reported an illegal NVLink peer-to-peer access; usually an application bug.",
		Action:      "Nothing for the GPU; debug the application (compute-sanitizer, cuda-gdb) and file a bug if that is inconclusive.",
		Class:       ClassApplication,
	},
	139: engine("ROBUST_CHANNEL_OFA1_ERROR", "OFA1 Error", "optical flow accelerator OFA1"),
	140: {
		Mnemonic: "UNRECOVERABLE_ECC_ERROR_ESCAPE", Name: "ECC Unrecovered Error",
		Bucket: "RESET_GPU", Investigate: "CONTACT_SUPPORT",
		Description: "Uncorrectable memory errors arrived in a way that kept the driver from retiring or remapping the affected memory.",
		Action:      "Reset the GPU; contact the vendor if it persists.",
		Class:       ClassMemory,
	},
	141: {
		Mnemonic: "ROBUST_CHANNEL_FAST_PATH_ERROR", Name: "CUDA Fast Path Error",
		Bucket: "IGNORE", Investigate: "CONTACT_SUPPORT",
		Description: "The CUDA fast path (work submission that bypasses the kernel driver) reported an error.",
		Action:      actIgnore,
		Class:       ClassDriver,
	},
	142: {
		Mnemonic: "ROBUST_CHANNEL_NVENC3_ERROR", Name: "NVENC3 Error",
		Bucket: "CONTACT_SUPPORT", Investigate: "",
		Description: "The video encoder NVENC3 raised an exception.",
		Action:      "Collect nvidia-bug-report.sh and contact support.",
		Class:       ClassApplication,
	},
	143: {
		Mnemonic: "GPU_INIT_ERROR", Name: "GPU Initialization Error",
		Bucket: "RESET_GPU", Investigate: "CONTACT_SUPPORT",
		Description: "The GPU failed to initialize.",
		Action:      actResetGPU,
		Class:       ClassHardware,
	},
	144: {Mnemonic: "NVLINK_SAW_ERROR", Name: "NVLINK: SAW Error", Bucket: "WORKFLOW_NVLINK5_ERR", Investigate: "WORKFLOW_NVLINK5_ERR", Description: descNVLink5Unit, Action: actNVLink5, Class: ClassInterconnect},
	145: {Mnemonic: "NVLINK_RLW_ERROR", Name: "NVLINK: RLW Error", Bucket: "WORKFLOW_NVLINK5_ERR", Investigate: "WORKFLOW_NVLINK5_ERR", Description: descNVLink5Unit, Action: actNVLink5, Class: ClassInterconnect},
	146: {Mnemonic: "NVLINK_TLW_ERROR", Name: "NVLINK: TLW Error", Bucket: "WORKFLOW_NVLINK5_ERR", Investigate: "WORKFLOW_NVLINK5_ERR", Description: descNVLink5Unit, Action: actNVLink5, Class: ClassInterconnect},
	147: {Mnemonic: "NVLINK_TREX_ERROR", Name: "NVLINK: TREX Error", Bucket: "WORKFLOW_NVLINK5_ERR", Investigate: "WORKFLOW_NVLINK5_ERR", Description: descNVLink5Unit, Action: actNVLink5, Class: ClassInterconnect},
	148: {Mnemonic: "NVLINK_NVLPW_CTRL_ERROR", Name: "NVLINK: NVLPW_CTRL Error", Bucket: "WORKFLOW_NVLINK5_ERR", Investigate: "WORKFLOW_NVLINK5_ERR", Description: descNVLink5Unit, Action: actNVLink5, Class: ClassInterconnect},
	149: {
		Mnemonic: "NVLINK_NETIR_ERROR", Name: "NVLINK: NETIR Error",
		Bucket: "WORKFLOW_NVLINK5_ERR", Investigate: "WORKFLOW_NVLINK5_ERR",
		Description: descNVLink5Unit + " A link-down event (NETIR_LINK_EVT / NETIR_LINK_DOWN) is always link fatal.",
		Action:      "A link down (NETIR_LINK_EVT / NETIR_LINK_DOWN) is link fatal: start no new work on the GPU, let its jobs drain, then reset it. " + actNVLink5,
		Class:       ClassInterconnect,
	},
	150: {
		Mnemonic: "NVLINK_MSE_ERROR", Name: "NVLINK: MSE Error",
		Bucket: "WORKFLOW_NVLINK5_ERR", Investigate: "WORKFLOW_NVLINK5_ERR",
		Description: "The NVLink management firmware (MSE) reported an error or its watchdog fired; every decode NVIDIA lists for it is fatal.",
		Action:      "Fatal: reset the GPU now; contact support if it recurs.",
		Class:       ClassInterconnect,
	},
	151: {
		Mnemonic: "ROBUST_CHANNEL_KEY_ROTATION_ERROR", Name: "Key rotation Error",
		Bucket: "RESTART_VM", Investigate: "CONTACT_SUPPORT",
		Description: "Rotating the encryption keys of a confidential-computing channel failed.",
		Action:      "Restart the VM that owns the GPU; a GPU reset or node reboot is not needed.",
		Class:       ClassDriver,
	},
	154: {
		Mnemonic: "GPU_RECOVERY_ACTION_CHANGED", Name: "GPU Recovery Action Changed",
		Bucket: "XID_154", Investigate: "N/A (informational, about another Xid)",
		Description: "The driver changed the recovery action the GPU needs, summing up the Xids before it; the new action is the hex value after \"to\".",
		Action:      "Do what the new recovery action says (see recovery= on this line): 0 nothing; 1 reset the GPU; 2 reboot the node; 3 drain P2P: stop the processes using peer-to-peer on this GPU, then query the recovery action again; 4 drain and reset: let jobs finish or stop them, start none, then reset the GPU. Values above 4 mean different things in different NVML versions: read the driver's own words on the line.",
		Class:       ClassInformational,
	},
	155: {
		Mnemonic: "NVLINK_SW_DEFINED_ERROR", Name: "NVLINK: SW Defined Error",
		Bucket: "RESET_GPU", Investigate: "INVESTIGATE_SW_USER",
		Description: "An NVLink went down in a way software flagged as intentional (including transitions to sleep).",
		Action:      "Reset the GPU now; then find out what took the link down if nobody meant to.",
		Class:       ClassInterconnect,
	},
	156: {
		Mnemonic: "RESOURCE_RETIREMENT_EVENT", Name: "Resource Retirement Event",
		Bucket: "RESET_GPU", Investigate: "IGNORE",
		Description: "The GPU retired a faulty internal resource; the retirement takes effect at the next reset.",
		Action:      "Reset the GPU to apply the retirement.",
		Class:       ClassHardware,
	},
	157: {
		Mnemonic: "RESOURCE_RETIREMENT_FAILURE", Name: "Resource Retirement Failure",
		Bucket: "IGNORE", Investigate: "CONTACT_SUPPORT",
		Description: "The GPU could not retire a faulty internal resource: no spare is left, so the same Xid may come back.",
		Action:      "Work may go on; if the Xid keeps coming back, contact support about the GPU.",
		Class:       ClassHardware,
	},
	158: {
		Mnemonic: "GPU_FATAL_TIMEOUT", Name: "GPU Fatal Timeout",
		Bucket: "RESET_GPU", Investigate: "CONTACT_SUPPORT",
		Description: "A fatal timeout inside the GPU; it comes with an Xid 154 naming the recovery action.",
		Action:      "Reset the GPU now (and do what the accompanying Xid 154 says); contact support if it recurs.",
		Class:       ClassDriver,
	},
	159: {
		Mnemonic: "ROBUST_CHANNEL_CHI_NON_DATA_ERROR", Name: "CHI Non-Data Error",
		Bucket: "CHECK_UVM", Investigate: "SYMPATHETIC_REPORT_SOLO",
		Description: "A non-data error on the CHI protocol of the C2C link to the CPU; may be seen on any C2C-connected GPU.",
		Action:      "If UVM or vGPU is in use on the GPU, reset it; otherwise nothing. Look for the other errors it usually comes with; report it if it comes alone.",
		Class:       ClassInterconnect,
	},
	160: {
		Mnemonic: "CHANNEL_RETIREMENT_EVENT", Name: "Channel Retirement Event",
		Bucket: "IGNORE", Investigate: "INVESTIGATE_SW",
		Description: "The driver retired a GPU channel.",
		Action:      "Nothing for the GPU now; if it recurs, investigate the software that owned the channel.",
		Class:       ClassDriver,
	},
	161: {
		Mnemonic: "CHANNEL_RETIREMENT_FAILURE", Name: "Channel Retirement Failure",
		Bucket: "IGNORE", Investigate: "INVESTIGATE_SW",
		Description: "The driver could not retire a GPU channel.",
		Action:      "Nothing for the GPU now; if it recurs, investigate the software that owned the channel.",
		Class:       ClassDriver,
	},
	162: {
		Mnemonic: "PSHC_REENGAGED", Name: "Power Smoothing HW Circuitry capability reengaged",
		Description: "The power smoothing circuitry, which evens out the GPU's power swings, works again." + descNoBucket,
		Action:      "Nothing: power smoothing is back.",
		Class:       ClassInformational,
	},
	163: {
		Mnemonic: "PSHC_DISENGAGED", Name: "Power Smoothing HW Circuitry capability disengaged",
		Description: "The power smoothing circuitry was turned off, after thermal events or a timeout; no GPU reset is needed." + descNoBucket,
		Action:      "No reset needed. If power smoothing is wanted: resolve the thermal events, or after a timeout reload the driver or reset the GPU.",
		Class:       ClassHardware,
	},
	164: {
		Mnemonic: "PSHC_LOW_LIFETIME", Name: "Power Smoothing HW Circuitry low lifetime reached",
		Description: "The power smoothing circuitry is close to the end of its life and will soon be disabled." + descNoBucket,
		Action:      "Watch the power swings; if the datacenter cannot absorb them without smoothing, plan to replace the GPU.",
		Class:       ClassHardware,
	},
	165: {
		Mnemonic: "PSHC_ZERO_LIFETIME", Name: "Power Smoothing HW Circuitry lifetime exhausted",
		Description: "The power smoothing circuitry is worn out; the driver disables it and the GPU's power will swing." + descNoBucket,
		Action:      "Make sure the power infrastructure absorbs the swings; replace the GPU if smoothing is required.",
		Class:       ClassHardware,
	},
	166: {
		Mnemonic: "NVLINK_SECURE_CRYPTO_ERR", Name: "CC traffic seen prior to link properly being configured for encrypted traffic",
		Description: "Confidential-computing traffic crossed an NVLink before the link was set up for encryption (CC mode only)." + descNoBucket,
		Action:      actNoBucket,
		Class:       ClassInterconnect,
	},
	167: {
		Mnemonic: "PCIE_FATAL_TIMEOUT", Name: "PCIe Fatal Timeout",
		Description: "A fatal timeout on the GPU's PCIe interface." + descNoBucket,
		Action:      actNoBucket,
		Class:       ClassHardware,
	},
	168: {
		Mnemonic: "REDUCED_GPU_MEMORY_CAPACITY", Name: "Errors found in WPR (write protected region)",
		Description: "Memory errors were found in the write-protected region, so less GPU memory is usable; expected only with ECC disabled." + descNoBucket,
		Action:      "Enable ECC (so rows can be remapped) and reboot, or retry the boot with the write-protected region shifted.",
		Class:       ClassMemory,
	},
	169: {
		Mnemonic: "SEC2_HALT_ERROR", Name: "Internal micro-controller halt",
		Description: "The SEC2 security micro-controller on the GPU halted." + descNoBucket,
		Action:      actNoBucket,
		Class:       ClassDriver,
	},
	170: {
		Mnemonic: "NVLINK_SECURE_OTHER", Name: "Interrupt seen in CC mode",
		Description: "An NVLink interrupt arrived in confidential-computing mode (CC mode only)." + descNoBucket,
		Action:      actNoBucket,
		Class:       ClassInterconnect,
	},
	171: {
		Mnemonic: "UNCORRECTABLE_DRAM_ERROR", Name: "Uncorrectable DRAM Error (details Xid 48)",
		Description: "Details an Xid 48: the uncorrectable error was in DRAM (HBM)." + descNoBucket,
		Action:      "Follow the Xid 48 it details: reset the GPU (drain its jobs first if Xid 63 or 64 came too), check row remapping (nvidia-smi -q -d ROW_REMAPPER), then run field diagnostics.",
		Class:       ClassMemory,
	},
	172: {
		Mnemonic: "UNCORRECTABLE_SRAM_ERROR", Name: "Uncorrectable SRAM Error (details Xid 48)",
		Description: "Details an Xid 48: the uncorrectable error was in on-chip SRAM." + descNoBucket,
		Action:      "Follow the Xid 48 it details: reset the GPU, then check the SRAM error threshold flag (nvidia-smi -q -d ECC) and run field diagnostics if it is set.",
		Class:       ClassMemory,
	},
}
