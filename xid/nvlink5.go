package xid

import (
	"strconv"
	"strings"
)

// Xid 144 to 150 (NVLink 5, Blackwell) print the unit that failed and, in
// parentheses, the interrupt info and error status registers:
//
//	149, NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 (0x021425c6 0x00000000 0x00000000 ...)
//
// How bad the error is depends on those registers, not on the Xid number.
// NVIDIA's catalog ("XID 144-150 Decode") gives, per unit, the low bits of
// IntrInfo that name it (IntrInfo[9:0] before R575, IntrInfo[6:0] from R575
// on) and, per error status, the immediate action, the investigatory action
// and the severity. For a link-down event (Xid 149 NETIR_LINK_EVT, renamed
// NETIR_LINK_DOWN in R575) the row is chosen by the reason in IntrInfo[25:20]
// instead, and every reason is link fatal. The tables below transcribe the
// rows of that decode; nothing outside them is decoded.

// severity is the catalog's Severity column for a decode row.
type severity uint8

const (
	sevNonFatal   severity = iota + 1
	sevPromotable          // "Non-fatal*": fatal when IntrInfo's promote bit is set (action 2)
	sevFatal               // the GPU: all links go down, all channels are torn down
	sevLinkFatal           // one link: the GPU needs draining, then a reset
)

// String is the severity as the decode prints it.
func (s severity) String() string {
	switch s {
	case sevNonFatal:
		return "non-fatal"
	case sevPromotable:
		return "non-fatal unless promoted"
	case sevFatal:
		return "fatal"
	case sevLinkFatal:
		return "link fatal"
	}
	return "unknown"
}

// nvl5Row is one row of the decode: an error status (or link-down reason)
// with NVIDIA's buckets for it.
type nvl5Row struct {
	key         uint32 // error status, or for a link-down unit the reason IntrInfo[25:20]
	bucket      string // immediate action
	investigate string // investigatory action
	sev         severity
}

// nvl5Unit is one NVLink 5 unit of the decode.
type nvl5Unit struct {
	xid    int
	v1, v2 string // the unit's name on the line before R575 and from R575 on
	v1Bits uint32 // IntrInfo[9:0] before R575
	v2Bits uint32 // IntrInfo[6:0] from R575 on
	// byReason: rows are keyed by the link-down reason, IntrInfo[25:20].
	byReason bool
	// anyStatus: one row applies whatever the error status.
	anyStatus bool
	rows      []nvl5Row
}

// Often repeated rows.
var (
	nvl5SW    = nvl5Row{0x80000000, "IGNORE", "CONTACT_SUPPORT", sevNonFatal}
	nvl5Fatal = func(status uint32) nvl5Row { return nvl5Row{status, "RESET_GPU", "CONTACT_SUPPORT", sevFatal} }
	nvl5Quiet = func(status uint32) nvl5Row { return nvl5Row{status, "IGNORE", "IGNORE", sevNonFatal} }
	nvl5Watch = func(status uint32) nvl5Row { return nvl5Row{status, "IGNORE", "CONTACT_SUPPORT", sevNonFatal} }
	nvl5TLW   = []nvl5Row{nvl5Quiet(1), nvl5Watch(2), nvl5Fatal(4), nvl5SW}
)

// linkDown builds a link-down row for reason r.
func linkDown(r uint32, bucket, investigate string) nvl5Row {
	return nvl5Row{r, bucket, investigate, sevLinkFatal}
}

var nvl5Units = []nvl5Unit{
	{xid: 144, v1: "SAW_MVB", v2: "SAW_MVB", v1Bits: 0b0000100001, v2Bits: 0b0000001, rows: []nvl5Row{
		nvl5Watch(0x1), nvl5Fatal(0x2), nvl5Quiet(0x4), nvl5Watch(0x8), nvl5Fatal(0x10), nvl5Quiet(0x20)}},
	{xid: 145, v1: "RLW_CTRL", v2: "RLW_CTRL", v1Bits: 0b0001100010, v2Bits: 0b0000011, rows: []nvl5Row{nvl5SW}},
	{xid: 145, v1: "RLW_REMAP", v2: "RLW_REMAP", v1Bits: 0b0010000010, v2Bits: 0b0000100, rows: []nvl5Row{
		{0x1, "XID_154_EVAL", "CONTACT_SUPPORT", sevNonFatal},
		{0x2, "XID_154_EVAL", "CONTACT_SUPPORT", sevNonFatal},
		{0x4, "XID_154_EVAL", "CHECK_NVLINK_FAILURE_FLOW", sevNonFatal},
		{0x8, "XID_154_EVAL", "CHECK_NVLINK_FAILURE_FLOW", sevNonFatal},
		{0x10, "XID_154_EVAL", "CHECK_NVLINK_FAILURE_FLOW", sevNonFatal},
		{0x20, "XID_154_EVAL", "CHECK_NVLINK_FAILURE_FLOW", sevNonFatal},
		nvl5Fatal(0x40), nvl5Fatal(0x80), nvl5Quiet(0x100), nvl5Quiet(0x200), nvl5SW}},
	{xid: 145, v1: "RLW_RSPCOL", v2: "RLW_RSPCOL", v1Bits: 0b0010100010, v2Bits: 0b0000101, rows: []nvl5Row{
		nvl5Quiet(0x1), nvl5Fatal(0x2), nvl5SW}},
	{xid: 145, v1: "RLW_RXPIPE", v2: "RLW_RXPIPE", v1Bits: 0b0011000010, v2Bits: 0b0000110, rows: []nvl5Row{
		{0x1, "IGNORE", "CONTACT_SUPPORT", sevPromotable},
		{0x2, "IGNORE", "CONTACT_SUPPORT", sevPromotable},
		{0x4, "IGNORE", "CONTACT_SUPPORT", sevPromotable},
		nvl5Watch(0x8), nvl5SW}},
	{xid: 145, v1: "RLW_SRC_TRACK", v2: "RLW_SRC_TRACK", v1Bits: 0b0011100010, v2Bits: 0b0000111, rows: []nvl5Row{
		nvl5Fatal(0x1), nvl5Quiet(0x2),
		{0x4, "XID_154_EVAL", "IGNORE", sevNonFatal},
		{0x8, "XID_154_EVAL", "IGNORE", sevNonFatal},
		nvl5Fatal(0x10), nvl5Fatal(0x20), nvl5SW}},
	{xid: 145, v1: "RLW_TAGSTATE", v2: "RLW_TAGSTATE", v1Bits: 0b0100000010, v2Bits: 0b0001000, rows: []nvl5Row{
		nvl5Quiet(0x1), nvl5Fatal(0x2), nvl5Quiet(0x10000), nvl5Fatal(0x20000), nvl5Fatal(0x100000), nvl5SW}},
	{xid: 146, v1: "TLW_CTRL", v2: "TLW_CTRL", v1Bits: 0b0100100011, v2Bits: 0b0001001, rows: nvl5TLW},
	{xid: 146, v1: "TLW_RX", v2: "TLW_RX_PIPE0", v1Bits: 0b0101000011, v2Bits: 0b0001010, rows: nvl5TLW},
	{xid: 146, v1: "TLW_RX", v2: "TLW_RX_PIPE1", v1Bits: 0b0101000011, v2Bits: 0b0001011, rows: nvl5TLW},
	{xid: 146, v1: "TLW_TX", v2: "TLW_TX_PIPE0", v1Bits: 0b0101100011, v2Bits: 0b0001100, rows: nvl5TLW},
	{xid: 146, v1: "TLW_TX", v2: "TLW_TX_PIPE1", v1Bits: 0b0101100011, v2Bits: 0b0001101, rows: nvl5TLW},
	{xid: 147, v1: "TREX", v2: "TREX", v1Bits: 0b0110000100, v2Bits: 0b0001110, rows: []nvl5Row{nvl5Watch(0x1), nvl5SW}},
	{xid: 148, v1: "NVLPW_CTRL", v2: "NVLPW", v1Bits: 0b0000000101, v2Bits: 0b0001111, rows: []nvl5Row{nvl5SW}},
	{xid: 149, v1: "NETIR", v2: "NETIR_INT", v1Bits: 0b0000000110, v2Bits: 0b0011000, anyStatus: true, rows: []nvl5Row{
		{0, "RESET_GPU", "SYMPATHETIC_REPORT_SOLO", sevLinkFatal}}},
	{xid: 149, v1: "NETIR_LINK_EVT", v2: "NETIR_LINK_DOWN", v1Bits: 0b0111000110, v2Bits: 0b0010001, byReason: true, rows: []nvl5Row{
		linkDown(0b000000, "RESET_GPU", "SYMPATHETIC_REPORT_SOLO"),
		linkDown(0b000001, "RESET_GPU", "REPORT_ISSUE (if seen >1 per day)"),
		linkDown(0b000010, "RESET_GPU", "INVESTIGATE_LINK_SI"),
		linkDown(0b000100, "RESET_GPU", "INVESTIGATE_LINK_SI"),
		linkDown(0b001010, "RESET_GPU", "INVESTIGATE_LINK_SI"),
		linkDown(0b001111, "RESET_GPU", "INVESTIGATE_SW_USER"),
		linkDown(0b010000, "RESET_GPU", "INVESTIGATE_SW_USER_LINK_SI"),
		linkDown(0b010001, "RESET_GPU", "INVESTIGATE_SW_USER"),
		linkDown(0b010010, "RESET_GPU", "INVESTIGATE_SW_USER_LINK_SI"),
		linkDown(0b010101, "RESET_GPU", "INVESTIGATE_PEER_DEVICE"),
		linkDown(0b010110, "RESET_GPU", "INVESTIGATE_SW_USER"),
		linkDown(0b100000, "RESET_GPU", "INVESTIGATE_PEER_DEVICE"),
		linkDown(0b100001, "RESET_GPU", "INVESTIGATE_PEER_DEVICE"),
		linkDown(0b100010, "RESET_GPU", "INVESTIGATE_PEER_DEVICE"),
		linkDown(0b100011, "RESET_GPU", "INVESTIGATE_PEER_DEVICE"),
		linkDown(0b100100, "RESET_GPU", "INVESTIGATE_PEER_DEVICE"),
		linkDown(0b100101, "RESET_GPU", "INVESTIGATE_PEER_DEVICE"),
		linkDown(0b100110, "IGNORE", "INVESTIGATE_SW_USER"),
		linkDown(0b101000, "IGNORE", "INVESTIGATE_HOST"),
		linkDown(0b101010, "RESET_GPU", "INVESTIGATE_LINK_SI_AND_CABLES"),
		linkDown(0b101011, "RESET_GPU", "INVESTIGATE_LINK_SI_AND_CABLES")}},
	{xid: 149, v1: "NETIR_BER_EVENT", v2: "NETIR_BER_EVENT", v1Bits: 0b1000100110, v2Bits: 0b0010011, rows: []nvl5Row{
		{0x0, "IGNORE", "INVESTIGATE_LINK_SI_AND_CABLES", sevNonFatal},
		{0x1, "IGNORE", "INVESTIGATE_LINK_SI_AND_CABLES", sevNonFatal},
		{0x2, "IGNORE", "INVESTIGATE_LINK_SI_AND_CABLES", sevNonFatal},
		{0x3, "IGNORE", "INVESTIGATE_LINK_SI_AND_CABLES", sevNonFatal}}},
	{xid: 149, v1: "NETIR_MFDE_EVENT", v2: "NETIR_MFDE_EVENT", v1Bits: 0b1001000110, v2Bits: 0b0010100, rows: []nvl5Row{
		nvl5Fatal(0x1), nvl5Quiet(0x3), nvl5Fatal(0x4), nvl5Fatal(0x5), nvl5Fatal(0x7)}},
	{xid: 150, v1: "MSE", v2: "MSE", v1Bits: 0, v2Bits: 0, rows: []nvl5Row{
		nvl5Fatal(0x0), nvl5Fatal(0xFFFFFFFF)}},
}

// investigateAdvice says in our words what an investigatory bucket of the
// decode asks for. A bucket missing here is shown by its name only.
var investigateAdvice = map[string]string{
	"CONTACT_SUPPORT":                   "contact support if it recurs",
	"CHECK_NVLINK_FAILURE_FLOW":         "report it unless a link in the NVLink partition went down in the 30 s before",
	"INVESTIGATE_LINK_SI":               "have the link's signal integrity checked",
	"INVESTIGATE_LINK_SI_AND_CABLES":    "check the link's cable, transceiver, temperature and seating",
	"INVESTIGATE_PEER_DEVICE":           "look at the device at the other end of the link, which went down first",
	"INVESTIGATE_SW_USER":               "find out which software or user took the link down, if nobody meant to",
	"INVESTIGATE_SW_USER_LINK_SI":       "find out which software or user took the link down, if nobody meant to, and have the link's signal integrity checked",
	"INVESTIGATE_HOST":                  "check the host's other logs (the cause may be out of band)",
	"SYMPATHETIC_REPORT_SOLO":           "report it if it came alone (it is usually a consequence of other errors)",
	"REPORT_ISSUE (if seen >1 per day)": "report it if it happens more than once a day",
}

// NVLink5 is what the interrupt and status fields of an Xid 144-150 line
// decode to.
type NVLink5 struct {
	Unit        string // the unit as the line names it, e.g. "NETIR_LINK_EVT"
	R575        bool   // the fields are in the layout of R575 and later
	Link        int    // the link number; -1 when the line has none
	IntrInfo    uint32 // the first register in parentheses
	ErrorStatus uint32 // the second; meaningful only when HasStatus
	HasStatus   bool
	LinkDown    bool   // a link-down event: Reason is set
	Reason      uint32 // IntrInfo[25:20] of a link-down event
	Promoted    bool   // a promotable error had its promote bit set
	Severity    string // "fatal", "link fatal", "non-fatal", ...
	Bucket      string // NVIDIA's immediate action for this decode
	Investigate string // NVIDIA's investigatory action for this decode
}

// nvl5Fields are the parts of an Xid 144-150 line's text.
type nvl5Fields struct {
	unit string
	link int
	regs []uint32
}

// parseNVLink5Text takes the text after "149, " apart: the unit name first,
// "Link NN" somewhere, and the registers in parentheses (or brackets, as some
// older drivers print them). ok is false when no register could be read.
func parseNVLink5Text(text string) (nvl5Fields, bool) {
	f := nvl5Fields{link: -1}
	open := strings.IndexAny(text, "([")
	if open < 0 {
		return f, false
	}
	head := strings.Fields(text[:open])
	if len(head) > 0 {
		f.unit = head[0]
	}
	for i := 0; i+1 < len(head); i++ {
		if strings.EqualFold(head[i], "Link") {
			if n, err := strconv.Atoi(head[i+1]); err == nil && n >= 0 {
				f.link = n
			}
		}
	}
	rest := text[open+1:]
	if end := strings.IndexAny(rest, ")]"); end >= 0 {
		rest = rest[:end]
	}
	for _, w := range strings.Fields(rest) {
		w = strings.TrimRight(w, ",")
		h, ok := strings.CutPrefix(strings.ToLower(w), "0x")
		if !ok {
			break
		}
		v, err := strconv.ParseUint(h, 16, 32)
		if err != nil {
			break
		}
		f.regs = append(f.regs, uint32(v))
	}
	return f, len(f.regs) > 0
}

// isNVLink5 reports whether code is one of the NVLink 5 Xids, 144 to 150,
// whose text carries the fields DecodeNVLink5 reads.
func isNVLink5(code int) bool { return code >= 144 && code <= 150 }

// DecodeNVLink5 decodes the text the driver printed after an Xid 144-150
// code (everything after "N, "). ok is false when code is not 144-150, the
// registers cannot be read, or NVIDIA's decode has no row for them; then the
// caller must fall back on the Xid 154 that comes with it, or on the line's
// own Fatal/Nonfatal word.
func DecodeNVLink5(code int, text string) (NVLink5, bool) {
	if !isNVLink5(code) {
		return NVLink5{}, false
	}
	f, ok := parseNVLink5Text(text)
	if !ok {
		return NVLink5{}, false
	}
	d := NVLink5{Unit: f.unit, Link: f.link, IntrInfo: f.regs[0]}
	if len(f.regs) > 1 {
		d.ErrorStatus, d.HasStatus = f.regs[1], true
	}
	u, r575, found := findUnit(code, f.unit, d.IntrInfo)
	if !found {
		return NVLink5{}, false
	}
	d.R575 = r575
	key := d.ErrorStatus
	switch {
	case u.byReason:
		d.LinkDown = true
		d.Reason = d.IntrInfo >> 20 & 0x3f
		key = d.Reason
	case u.anyStatus:
		key = u.rows[0].key
	case !d.HasStatus:
		return NVLink5{}, false
	}
	for _, row := range u.rows {
		if row.key != key {
			continue
		}
		d.Severity, d.Bucket, d.Investigate = row.sev.String(), row.bucket, row.investigate
		if row.sev == sevPromotable {
			// "Decode for action 2": IntrInfo bit 10 (before R575) or bit 7
			// (R575 on) promotes the error to fatal, and the GPU needs a reset.
			bit := uint32(1) << 10
			if r575 {
				bit = 1 << 7
			}
			if d.IntrInfo&bit != 0 {
				d.Promoted, d.Severity, d.Bucket = true, sevFatal.String(), "RESET_GPU"
			}
		}
		return d, true
	}
	if u.byReason {
		// Every link down is link fatal, whatever the reason; only the
		// investigation depends on it.
		d.Severity, d.Bucket = sevLinkFatal.String(), "RESET_GPU"
		return d, true
	}
	return NVLink5{}, false
}

// findUnit picks the decode unit whose IntrInfo bits match, preferring the
// one whose name the line printed when several share the bits.
func findUnit(code int, name string, intr uint32) (nvl5Unit, bool, bool) {
	var (
		best    nvl5Unit
		bestNew bool
		found   bool
	)
	for _, u := range nvl5Units {
		if u.xid != code {
			continue
		}
		// Before R575 the unit sits in IntrInfo[9:0], from R575 in [6:0].
		// The name on the line tells the two apart where they are spelled
		// differently; otherwise the old layout is tried first.
		v1 := intr&0x3ff == u.v1Bits
		v2 := intr&0x7f == u.v2Bits
		if !v1 && !v2 {
			continue
		}
		named := name == u.v1 || name == u.v2
		r575 := !v1 || (v2 && name == u.v2 && name != u.v1)
		if !found || (named && best.v1 != name && best.v2 != name) {
			best, bestNew, found = u, r575, true
		}
	}
	return best, bestNew, found
}

// Action says in our words what to do about the decoded error now.
func (d NVLink5) Action() string {
	var s string
	switch {
	case d.Severity == sevLinkFatal.String():
		s = "Link fatal: the GPU is in the drain-and-reset state: start no new work on it, let its jobs drain (or stop them), then reset it."
	case d.Bucket == "RESET_GPU":
		s = "Fatal: reset the GPU now."
	case d.Bucket == "XID_154_EVAL":
		s = "Do what the Xid 154 that follows says; if none follows, restart the application."
	default:
		s = "Non-fatal: nothing to do now."
	}
	if a, ok := investigateAdvice[d.Investigate]; ok {
		s += " Then " + a + "."
	}
	return s
}

// String is the decode on one line, e.g. "NETIR_LINK_EVT link 1, IntrInfo
// 0x021425c6 (before R575): link down, reason 0x21: link fatal; NVIDIA:
// RESET_GPU, then INVESTIGATE_PEER_DEVICE".
func (d NVLink5) String() string {
	var b strings.Builder
	b.WriteString(d.Unit)
	if d.Link >= 0 {
		b.WriteString(" link " + strconv.Itoa(d.Link))
	}
	b.WriteString(", IntrInfo 0x" + hex32(d.IntrInfo))
	if d.R575 {
		b.WriteString(" (R575 layout)")
	} else {
		b.WriteString(" (before R575)")
	}
	if d.LinkDown {
		b.WriteString(": link down, reason 0x" + strconv.FormatUint(uint64(d.Reason), 16))
	} else if d.HasStatus {
		b.WriteString(", error status 0x" + hex32(d.ErrorStatus))
	}
	if d.Promoted {
		b.WriteString(", promoted")
	}
	b.WriteString(": " + d.Severity + "; NVIDIA: " + d.Bucket)
	if d.Investigate != "" {
		b.WriteString(", then " + d.Investigate)
	}
	return b.String()
}

func hex32(v uint32) string {
	h := strconv.FormatUint(uint64(v), 16)
	return strings.Repeat("0", 8-len(h)) + h
}
