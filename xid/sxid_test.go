package xid

import "testing"

func TestSXidCatalog(t *testing.T) {
	if i, ok := LookupSXid(15009); !ok || !i.Fatal || i.Name != "route GLT DBE" {
		t.Errorf("15009: %+v %v", i, ok)
	}
	if i, ok := LookupSXid(11012); !ok || i.Fatal {
		t.Errorf("11012 (a corrected single-bit error): %+v %v", i, ok)
	}
	if _, ok := LookupSXid(99999); ok || SXidName(99999) != "SXid 99999" {
		t.Errorf("an unknown SXid: %q", SXidName(99999))
	}
}
