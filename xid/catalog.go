package xid

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// catalogJSON is the catalog as data: one record per Xid code with NVIDIA's
// columns (mnemonic, name, immediate and investigatory bucket) and ours
// (class, description, action), and the advice texts several records share,
// which a record names as "@key". It is data rather than Go because it is a
// transcribed table: read and reviewed as one, and diffed against NVIDIA's.
//
//go:embed catalog.json
var catalogJSON []byte

// catalog maps an Xid code to its entry; Code is filled in by Lookup. It holds
// every code NVIDIA's catalog marks as applying to H100, B100 or GB200 (see
// hopperBlackwell in the tests), Xid 74 and 93 for A100/H100, and Xid 61,
// which older drivers printed and the catalog now lists as unused. A
// catalog.json that does not load is a bug in this package: the tests load it.
var catalog = func() map[int]Info {
	c, err := loadCatalog(catalogJSON)
	if err != nil {
		panic("xid: catalog.json: " + err.Error())
	}
	return c
}()

// descNoBucket ends the description of every code for which NVIDIA's catalog
// gives no resolution bucket (Xid 162 to 172 in the revision read).
const descNoBucket = " NVIDIA's catalog gives no resolution bucket for it."

// catalogRecord is one Xid in catalog.json.
type catalogRecord struct {
	Code        int    `json:"code"`
	Mnemonic    string `json:"mnemonic"`
	Name        string `json:"name"`
	Bucket      string `json:"bucket"`
	Investigate string `json:"investigate"`
	Class       string `json:"class"`
	Description string `json:"description"`
	Action      string `json:"action"`
}

// loadCatalog reads the catalog from b (catalog.json) and adds the engine
// exceptions, which follow one rule (engines). It refuses unknown fields, a
// record without a code, mnemonic, name, class, description or action, an
// unknown class or "@key", and a code given twice.
func loadCatalog(b []byte) (map[int]Info, error) {
	var f struct {
		Texts map[string]string `json:"texts"`
		Xids  []catalogRecord   `json:"xids"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	restartApp, ok := f.Texts["restart_app"]
	if !ok {
		return nil, errors.New(`no "restart_app" text (the engine exceptions' action)`)
	}
	out := engines(restartApp)
	for i, r := range f.Xids {
		in, err := r.info(f.Texts)
		if err != nil {
			return nil, fmt.Errorf("xids[%d]: %w", i, err)
		}
		if _, dup := out[r.Code]; dup {
			return nil, fmt.Errorf("xids[%d]: Xid %d is in the catalog twice", i, r.Code)
		}
		out[r.Code] = in
	}
	return out, nil
}

// info checks r and returns its entry, with "@key" texts replaced.
func (r catalogRecord) info(texts map[string]string) (Info, error) {
	if r.Code <= 0 {
		return Info{}, errors.New("no code")
	}
	for _, f := range []struct{ name, v string }{
		{"mnemonic", r.Mnemonic}, {"name", r.Name}, {"class", r.Class}, {"description", r.Description}, {"action", r.Action},
	} {
		if f.v == "" {
			return Info{}, fmt.Errorf("Xid %d: no %s", r.Code, f.name)
		}
	}
	class := ClassUnknown
	for c, n := range classNames {
		if n.key == r.Class {
			class = Class(c)
		}
	}
	if class == ClassUnknown {
		return Info{}, fmt.Errorf("Xid %d: unknown class %q", r.Code, r.Class)
	}
	text := func(s string) (string, error) {
		key, ref := strings.CutPrefix(s, "@")
		if !ref {
			return s, nil
		}
		t, ok := texts[key]
		if !ok {
			return "", fmt.Errorf("Xid %d: unknown text %q", r.Code, s)
		}
		return t, nil
	}
	desc, err := text(r.Description)
	if err != nil {
		return Info{}, err
	}
	action, err := text(r.Action)
	if err != nil {
		return Info{}, err
	}
	if r.Bucket == "" {
		desc += descNoBucket
	}
	return Info{
		Mnemonic: r.Mnemonic, Name: r.Name, Bucket: r.Bucket, Investigate: r.Investigate,
		Description: desc, Action: action, Class: class,
	}, nil
}

// engines returns the entries of the video, JPEG, optical-flow and copy
// engine exceptions: all restart the application (action), all ask for
// support if they recur. The codes are NVIDIA's, listed by unit number.
func engines(action string) map[int]Info {
	engine := func(mnemonic, name, unit string) Info {
		return Info{
			Mnemonic:    mnemonic,
			Name:        name,
			Bucket:      "RESTART_APP",
			Investigate: "CONTACT_SUPPORT",
			Description: "The " + unit + " raised an exception while running the application's work.",
			Action:      action,
			Class:       ClassApplication,
		}
	}
	out := map[int]Info{
		86:  engine("ROBUST_CHANNEL_OFA0_ERROR", "OFA Exception", "optical flow accelerator OFA0"),
		139: engine("ROBUST_CHANNEL_OFA1_ERROR", "OFA1 Error", "optical flow accelerator OFA1"),
	}
	// Copy engine CEn is the n-th code.
	for n, code := range []int{39, 40, 41, 70, 71, 72, 75, 76, 77, 85, 126, 127, 128, 129, 130, 131, 132, 133, 134, 135} {
		name := "CE" + strconv.Itoa(n) + ": Unknown Error"
		if n <= 2 {
			name = "Copy Engine Exception"
		}
		out[code] = engine("ROBUST_CHANNEL_CE"+strconv.Itoa(n)+"_ERROR", name, "copy engine CE"+strconv.Itoa(n))
	}
	// Video decoder NVDECn is the n-th code.
	for n, code := range []int{68, 83, 84, 88, 89, 96, 97, 98} {
		name := "NVDEC" + strconv.Itoa(n) + " Error"
		if n == 0 {
			name = "NVDEC0 Exception"
		}
		out[code] = engine("ROBUST_CHANNEL_NVDEC"+strconv.Itoa(n)+"_ERROR", name, "video decoder NVDEC"+strconv.Itoa(n))
	}
	// JPEG decoder NVJPGn is the n-th code.
	for n, code := range []int{82, 99, 100, 101, 102, 103, 104, 105} {
		out[code] = engine("ROBUST_CHANNEL_NVJPG"+strconv.Itoa(n)+"_ERROR", "NVJPG"+strconv.Itoa(n)+" Error", "JPEG decoder NVJPG"+strconv.Itoa(n))
	}
	return out
}
