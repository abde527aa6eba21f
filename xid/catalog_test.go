package xid

import (
	"strings"
	"testing"
)

// TestCatalogLoads: the embedded catalog.json loads (the package would not
// start otherwise) with every record and the engine exceptions.
func TestCatalogLoads(t *testing.T) {
	c, err := loadCatalog(catalogJSON)
	if err != nil {
		t.Fatal(err)
	}
	if len(c) != len(catalog) || len(c) < 100 {
		t.Fatalf("%d entries, want %d (and at least 100)", len(c), len(catalog))
	}
	if in := c[171]; !strings.HasSuffix(in.Description, descNoBucket) || in.Bucket != "" {
		t.Errorf("Xid 171 has no bucket but lacks the note: %+v", in)
	}
	if in := c[79]; strings.HasSuffix(in.Description, descNoBucket) {
		t.Errorf("Xid 79 has a bucket but says it has none: %+v", in)
	}
}

// TestLoadCatalogRefuses: each mistake in catalog.json is refused with a
// message that names it.
func TestLoadCatalogRefuses(t *testing.T) {
	const texts = `"texts": {"restart_app": "Restart it.", "other": "Other."}`
	rec := func(fields string) string { return `{` + texts + `, "xids": [` + fields + `]}` }
	const good = `{"code": 8, "mnemonic": "M", "name": "N", "bucket": "B", "class": "driver", "description": "D", "action": "@other"}`
	for _, tt := range []struct {
		name, in, want string
	}{
		{"not JSON", `{"texts": `, "unexpected EOF"},
		{"unknown field", rec(`{"code": 8, "mnemonc": "M"}`), `unknown field "mnemonc"`},
		{"no restart_app text", `{"texts": {}, "xids": []}`, `no "restart_app" text`},
		{"no code", rec(`{"mnemonic": "M", "name": "N", "class": "driver", "description": "D", "action": "A"}`), "xids[0]: no code"},
		{"no name", rec(`{"code": 8, "mnemonic": "M", "class": "driver", "description": "D", "action": "A"}`), "Xid 8: no name"},
		{"no action", rec(`{"code": 8, "mnemonic": "M", "name": "N", "class": "driver", "description": "D"}`), "Xid 8: no action"},
		{"unknown class", rec(`{"code": 8, "mnemonic": "M", "name": "N", "class": "gpu", "description": "D", "action": "A"}`), `Xid 8: unknown class "gpu"`},
		{"unknown text", rec(`{"code": 8, "mnemonic": "M", "name": "N", "class": "driver", "description": "@nope", "action": "A"}`), `Xid 8: unknown text "@nope"`},
		{"twice", rec(good + `, ` + good), "xids[1]: Xid 8 is in the catalog twice"},
		{"an engine's code", rec(`{"code": 39, "mnemonic": "M", "name": "N", "class": "driver", "description": "D", "action": "A"}`), "Xid 39 is in the catalog twice"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadCatalog([]byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("loadCatalog = %v, want an error with %q", err, tt.want)
			}
		})
	}
	c, err := loadCatalog([]byte(rec(good)))
	if err != nil {
		t.Fatal(err)
	}
	if in := c[8]; in.Action != "Other." || in.Class != ClassDriver || in.Description != "D" {
		t.Errorf("a good record loads as %+v", in)
	}
}
