package sink

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCompareInventory: boards are matched by UUID, never by index.
func TestCompareInventory(t *testing.T) {
	b := func(i int, uuid, bus string) Board {
		return Board{Index: i, UUID: uuid, Serial: "s-" + uuid, Bus: bus}
	}
	eight := func(skip string) []Board {
		var out []Board
		for i, u := range []string{"GPU-a", "GPU-b", "GPU-c"} {
			if u != skip {
				out = append(out, b(i, u, "bus-"+u))
			}
		}
		return out
	}
	renumber := func(bs []Board) []Board {
		for i := range bs {
			bs[i].Index = i
		}
		return bs
	}
	for _, tc := range []struct {
		name      string
		prev, cur []Board
		want      []string // change:uuid:index
	}{
		{"same", eight(""), eight(""), nil},
		{"first run", nil, eight(""), []string{"new:GPU-a:0", "new:GPU-b:1", "new:GPU-c:2"}},
		{"GPU 0 fell off, the others moved down", eight(""), renumber(eight("GPU-a")), []string{"missing:GPU-a:0", "moved:GPU-b:0", "moved:GPU-c:1"}},
		{"a board added", renumber(eight("GPU-a")), eight(""), []string{"moved:GPU-b:1", "moved:GPU-c:2", "new:GPU-a:0"}},
		{"same index, another slot", []Board{b(0, "GPU-a", "x")}, []Board{b(0, "GPU-a", "y")}, []string{"moved:GPU-a:0"}},
		{"a board swapped for another", []Board{b(0, "GPU-a", "x")}, []Board{b(0, "GPU-z", "x")}, []string{"missing:GPU-a:0", "new:GPU-z:0"}},
		{"stuck at start: not matched", []Board{b(0, "GPU-a", "x"), b(1, "GPU-b", "y")}, []Board{b(0, "", ""), b(1, "GPU-b", "y")}, []string{"missing:GPU-a:0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, c := range CompareInventory(tc.prev, tc.cur) {
				got = append(got, c.Change+":"+c.Board.UUID+":"+strconv.Itoa(c.Board.Index))
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestInventoryEvent: the events.log lines, a missing board at warning
// level with where it was, a moved one with where it was before.
func TestInventoryEvent(t *testing.T) {
	at := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	a := Board{Index: 0, UUID: "GPU-a", Serial: "1791025012340", Bus: "00000000:01:00.0", Name: "NVIDIA X"}
	moved := a
	moved.Index, moved.Bus = 1, "00000000:21:00.0"
	for _, tc := range []struct {
		c     InventoryChange
		want  string
		level string
	}{
		{InventoryChange{Change: InventoryMissing, Board: a, Unidentified: 1},
			`uuid=GPU-a level=warning gpu=? source=start type=INVENTORY change=missing serial=1791025012340 name="NVIDIA X" prev_gpu=0 prev_bus=00000000:01:00.0 unidentified=1`, "warning"},
		{InventoryChange{Change: InventoryNew, Board: a},
			`uuid=GPU-a level=info gpu=0 bus=00000000:01:00.0 source=start type=INVENTORY change=new serial=1791025012340 name="NVIDIA X"`, "info"},
		{InventoryChange{Change: InventoryMoved, Board: moved, Prev: a},
			`uuid=GPU-a level=info gpu=1 bus=00000000:21:00.0 source=start type=INVENTORY change=moved serial=1791025012340 name="NVIDIA X" prev_gpu=0 prev_bus=00000000:01:00.0`, "info"},
	} {
		e := tc.c.Event(at)
		e.Host = "h"
		line := e.Line()
		if want := "time=2026-12-06T07:00:00.000Z host=h " + tc.want; line != want {
			t.Errorf("line\n got %s\nwant %s", line, want)
		}
	}
}

// TestMissingEvent: a board gone since the previous run, and a start with
// fewer GPUs than expected, are critical GPU_MISSING lines that say where
// the board was in the kernel's spelling.
func TestMissingEvent(t *testing.T) {
	at := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	b := Board{Index: 2, UUID: "GPU-5a3c1e2f", Serial: "1791025012340", Bus: "00000000:4B:00.0", Name: "NVIDIA X"}
	for _, tc := range []struct {
		name string
		e    EventLine
		want string
	}{
		{"a board of the previous run", InventoryChange{Change: InventoryMissing, Board: b}.MissingEvent(at),
			`uuid=GPU-5a3c1e2f level=critical gpu=? source=start type=GPU_MISSING detail="GPU-5a3c1e2f (serial 1791025012340) at 0000:4b:00.0 missing since this boot" serial=1791025012340 prev_gpu=2 prev_bus=00000000:4B:00.0`},
		{"fewer than --expect-gpus", ExpectedEvent(at, 8, 7),
			`level=critical gpu=? source=start type=GPU_MISSING detail="8 GPUs expected, 7 enumerated" expected=8 enumerated=7`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.e.Host = "h"
			if got, want := tc.e.Line(), "time=2026-12-06T07:00:00.000Z host=h "+tc.want; got != want {
				t.Errorf("line\n got %s\nwant %s", got, want)
			}
			if tc.e.Class() != EventIncident {
				t.Errorf("class %v, want an incident", tc.e.Class())
			}
		})
	}
	if got := (Board{Index: 1}).MissingText(); got != "GPU 1 missing since this boot" {
		t.Errorf("an unidentified board: %q", got)
	}
}

// TestCompareFirmware: a driver update is one host line, a VBIOS update
// one line per board, both routine; what either run did not know, or a
// board the previous run did not have, is not compared.
func TestCompareFirmware(t *testing.T) {
	at := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	cur := []Board{{Index: 0, UUID: "GPU-a", Serial: "1", Bus: "00000000:01:00.0"}, {Index: 1, UUID: "GPU-b"}, {Index: 2, UUID: "GPU-c"}}
	var got []string
	for _, e := range CompareFirmware(at, "570.86.15", "575.51.03",
		map[string]string{"GPU-a": "96.00.89.00.01", "GPU-b": "96.00.89.00.01"},
		map[string]string{"GPU-a": "96.00.9F.00.04", "GPU-b": "96.00.89.00.01", "GPU-c": "96.00.9F.00.04"}, cur) {
		e.Host = "h"
		if e.Class() != EventRoutine {
			t.Errorf("%s: class %v, want routine", e.Line(), e.Class())
		}
		got = append(got, e.Line())
	}
	want := []string{
		"time=2026-12-06T07:00:00.000Z host=h level=info gpu=? source=start type=INVENTORY change=driver from=570.86.15 to=575.51.03",
		"time=2026-12-06T07:00:00.000Z host=h uuid=GPU-a level=info gpu=0 bus=00000000:01:00.0 source=start type=INVENTORY change=vbios serial=1 from=96.00.89.00.01 to=96.00.9F.00.04",
	}
	if !slices.Equal(got, want) {
		t.Errorf("lines\n got %q\nwant %q", got, want)
	}
	if n := len(CompareFirmware(at, "", "575.51.03", nil, map[string]string{"GPU-a": "x"}, cur)); n != 0 {
		t.Errorf("a previous run that recorded nothing: %d lines", n)
	}
}
