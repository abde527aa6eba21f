package xid

import (
	"strconv"
	"strings"
)

// RecoveryXid is the Xid that announces a change of the GPU's recovery
// action; its text carries the new action (see ParseRecovery).
const RecoveryXid = 154

// recoveryActions names the GPU recovery actions NVML reports as
// nvmlDeviceGpuRecoveryAction_t and the driver prints in Xid 154 after "to",
// with what to do about each, in our words. Only 0 to 4 are here: the driver's
// own words for them differ between releases ("GPU Reset Required", "PF FLR";
// "Node Reboot Required", "OS Reboot"), so the names are ours and stable.
// Values above 4 mean different things in different NVML versions (IMEX domain
// recovery, bus reset, system reboot), so they are never named here: a report
// shows the number and the driver's own words.
var recoveryActions = []struct {
	name, advice string
}{
	0: {"none", "Nothing to do."},
	1: {"GPU reset", "Reset the GPU (nvidia-smi -r) once its jobs have stopped."},
	2: {"node reboot", "Reboot the node."},
	3: {"drain P2P", "Stop the processes that use peer-to-peer (NVLink/PCIe P2P) on this GPU, then query the GPU's recovery action again and do what it says then."},
	4: {"drain and reset", "Start no new work on the GPU, let its jobs finish (or stop them), then reset it."},
}

// RecoveryActionName names a GPU recovery action. Values it does not know
// come back as "unknown (0xN)".
func RecoveryActionName(v uint64) string {
	if v < uint64(len(recoveryActions)) {
		return recoveryActions[v].name
	}
	return "unknown (0x" + strconv.FormatUint(v, 16) + ")"
}

// RecoveryAdvice says what to do about recovery action v. words are the
// driver's own words for it (see ParseRecovery), empty when the report
// carried none (an NVML event). For a value above 4 the advice repeats the
// number and the driver's words and guesses nothing.
func RecoveryAdvice(v uint64, words string) string {
	if v < uint64(len(recoveryActions)) {
		return recoveryActions[v].advice
	}
	s := "Recovery action 0x" + strconv.FormatUint(v, 16) + " is not one this version knows (values above 4 differ between NVML versions): "
	if words == "" {
		return s + "the report carried no words for it; check the driver's documentation for this value."
	}
	return s + "the driver calls it " + strconv.Quote(words) + "; do that."
}

// ParseRecovery reads the new recovery action from the text of an Xid 154:
// the hex number after the last "to" ("GPU recovery action changed from 0x0
// (None) to 0x1 (GPU Reset Required)"), and the driver's words in parentheses
// after it, if any. The number decides; the words differ between drivers. ok
// is false when the text has no "to 0x...".
func ParseRecovery(text string) (v uint64, words string, ok bool) {
	for i := 0; i+2 <= len(text); i++ {
		if !strings.EqualFold(text[i:i+2], "to") {
			continue
		}
		// "to" must be a word of its own: not the end of "into" or "auto".
		if i > 0 && text[i-1] != ' ' && text[i-1] != '(' && text[i-1] != ',' {
			continue
		}
		j := i + 2
		for j < len(text) && (text[j] == ' ' || text[j] == '\t') {
			j++
		}
		if j == i+2 || j+2 > len(text) || text[j] != '0' || (text[j+1] != 'x' && text[j+1] != 'X') {
			continue
		}
		j += 2
		k := j
		for k < len(text) && isHex(text[k]) {
			k++
		}
		if k == j || k-j > 16 {
			continue
		}
		n, err := strconv.ParseUint(text[j:k], 16, 64)
		if err != nil {
			continue
		}
		v, words, ok = n, "", true
		rest := strings.TrimLeft(text[k:], " \t")
		if strings.HasPrefix(rest, "(") {
			if end := strings.IndexByte(rest, ')'); end > 0 {
				words = strings.TrimSpace(rest[1:end])
			}
		}
	}
	return v, words, ok
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
