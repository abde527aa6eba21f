package cper

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// CursorFile is the cursors' file in the log directory.
const CursorFile = "cper-cursor"

// maxSeen bounds the record ids a cursor remembers: enough to skip what a
// driver that forgot the handle (a new boot, a reloaded module) returns
// again from the start.
const maxSeen = 256

// Cursor is where reading one source's records got to: the driver's opaque
// handle, and the ids of the records already saved, so that a handle the
// driver no longer honours (it starts over) repeats nothing.
type Cursor struct {
	Handle uint64
	Seen   []uint64 // oldest first, at most maxSeen
}

// Saw reports whether the record id was saved before.
func (c *Cursor) Saw(id uint64) bool { return slices.Contains(c.Seen, id) }

// Mark remembers a saved record id.
func (c *Cursor) Mark(id uint64) {
	c.Seen = append(c.Seen, id)
	if len(c.Seen) > maxSeen {
		c.Seen = slices.Delete(c.Seen, 0, len(c.Seen)-maxSeen)
	}
}

// maxCursorsFile bounds the cursors' file read at start: a line per source
// (a GPU, "bert") of at most maxSeen ids is a few kB.
const maxCursorsFile = 1 << 20

// Cursors are the cursors of every source (a GPU's UUID, "bert"), kept in
// one small file replaced atomically after every change.
type Cursors struct {
	path string
	m    map[string]Cursor
}

// LoadCursors reads the cursors' file at path; a missing file is no cursor
// yet. A line it cannot read is an error naming it (the caller starts from
// the beginning then, and the seen ids skip the repeats it can).
func LoadCursors(path string) (*Cursors, error) {
	c := &Cursors{path: path, m: map[string]Cursor{}}
	// The daemon's own file: never through a planted link, never a FIFO
	// that would hold the start, never more than a cursors' file holds.
	data, err := sink.ReadBounded(sink.OpenOwnRegular, path, maxCursorsFile, false)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("read CPER cursors: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		var cur Cursor
		var perr error
		if len(f) < 2 || len(f) > 3 {
			perr = errors.New("want: source handle [ids]")
		} else if cur.Handle, perr = strconv.ParseUint(f[1], 10, 64); perr == nil && len(f) == 3 {
			for _, s := range strings.Split(f[2], ",") {
				id, err := strconv.ParseUint(s, 10, 64)
				if err != nil {
					perr = err
					break
				}
				cur.Mark(id)
			}
		}
		if perr != nil {
			return c, fmt.Errorf("CPER cursors %s line %d: %w", path, n, perr)
		}
		c.m[f[0]] = cur
	}
	return c, nil
}

// Get is the source's cursor (zero: from the start).
func (c *Cursors) Get(source string) Cursor {
	cur := c.m[source]
	cur.Seen = slices.Clone(cur.Seen)
	return cur
}

// Set replaces the source's cursor and writes the file (atomically: a crash
// leaves the old cursors or the new, and a symlink planted at the path is
// replaced, never followed).
func (c *Cursors) Set(source string, cur Cursor) error {
	if strings.ContainsAny(source, " \t\n") || source == "" {
		return fmt.Errorf("CPER cursor source %q: empty or with blanks", source)
	}
	c.m[source] = cur
	var b strings.Builder
	keys := make([]string, 0, len(c.m))
	for k := range c.m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := c.m[k]
		b.WriteString(k + " " + strconv.FormatUint(v.Handle, 10))
		for i, id := range v.Seen {
			sep := ","
			if i == 0 {
				sep = " "
			}
			b.WriteString(sep + strconv.FormatUint(id, 10))
		}
		b.WriteByte('\n')
	}
	if err := sink.WriteFileAtomic(c.path, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("write CPER cursors: %w", err)
	}
	return nil
}
