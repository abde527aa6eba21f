package xid

import (
	"strings"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

func TestRecoveryActionName(t *testing.T) {
	testutil.Check(t, "RecoveryActionName", RecoveryActionName, []testutil.Case[uint64, string]{
		{Name: "none", In: 0, Want: "none"},
		{Name: "GPU reset", In: 1, Want: "GPU reset"},
		{Name: "node reboot", In: 2, Want: "node reboot"},
		{Name: "drain P2P", In: 3, Want: "drain P2P"},
		{Name: "drain and reset", In: 4, Want: "drain and reset"},
		{Name: "first unknown", In: 5, Want: "unknown (0x5)"},
		{Name: "hex spelled lower case", In: 0xdeadbeef, Want: "unknown (0xdeadbeef)"},
		{Name: "max", In: ^uint64(0), Want: "unknown (0xffffffffffffffff)"},
	})
}

func TestParseRecovery(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		ok    bool
		v     uint64
		words string
	}{
		{"reset", "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)", true, 1, "GPU Reset Required"},
		{"drain P2P", "GPU recovery action changed from 0x1 (GPU Reset Required) to 0x3 (Drain P2P)", true, 3, "Drain P2P"},
		{"drain and reset", "GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)", true, 4, "Drain and Reset"},
		{"above 4 keeps the driver's words", "GPU recovery action changed from 0x0 (None) to 0x6 (Bus Reset)", true, 6, "Bus Reset"},
		{"no words", "GPU recovery action changed from 0x0 to 0x2", true, 2, ""},
		{"upper case hex", "recovery action changed from 0X0 TO 0XA (Something New)", true, 10, "Something New"},
		{"into is not to", "changed into 0x5", false, 0, ""},
		{"no value", "GPU recovery action changed", false, 0, ""},
		{"unclosed words are dropped", "changed from 0x0 (None) to 0x2 (Node Reb", true, 2, ""},
		{"too long", "to 0x11112222333344445", false, 0, ""},
		{"too long after a from", "changed from 0x0 to 0x11112222333344445", false, 0, ""},
		{"other words for reset", "GPU recovery action changed from 0x0 (None) to 0x1 (PF FLR)", true, 1, "PF FLR"},
		{"reboot in other words", "GPU recovery action changed from 0x0 (None) to 0x2 (OS Reboot)", true, 2, "OS Reboot"},
		{"the number wins over words that disagree", "GPU recovery action changed from 0x1 (GPU Reset Required) to 0x4 (None)", true, 4, "None"},
		{"wide hex", "GPU recovery action changed from 0x00000002 to 0x0000001A", true, 0x1a, ""},
		{"to glued to another word", "recovery changed auto0x1 into0x2", false, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, words, ok := ParseRecovery(tt.text)
			if ok != tt.ok || v != tt.v || words != tt.words {
				t.Errorf("ParseRecovery(%q) = %d, %q, %v; want %d, %q, %v", tt.text, v, words, ok, tt.v, tt.words, tt.ok)
			}
		})
	}
}

func TestRecoveryAdviceDistinguishesDrains(t *testing.T) {
	p2p, reset := RecoveryAdvice(3, ""), RecoveryAdvice(4, "")
	if p2p == reset {
		t.Fatalf("drain P2P and drain and reset give the same advice %q", p2p)
	}
	if !strings.Contains(p2p, "query the GPU's recovery action again") {
		t.Errorf("drain P2P advice %q does not say to query the action again", p2p)
	}
	if !strings.Contains(reset, "reset") {
		t.Errorf("drain and reset advice %q does not say reset", reset)
	}
}

func TestRecoveryAdviceAbove4NeverGuesses(t *testing.T) {
	got := RecoveryAdvice(5, "IMEX Domain Recovery")
	if !strings.Contains(got, "0x5") || !strings.Contains(got, `"IMEX Domain Recovery"`) {
		t.Errorf("advice %q lacks the number or the driver's words", got)
	}
	for _, v := range []uint64{5, 6, 7, 0xff} {
		for _, a := range recoveryActions {
			if strings.Contains(RecoveryAdvice(v, ""), a.advice) {
				t.Errorf("value %d borrows the advice of %q", v, a.name)
			}
		}
	}
}
