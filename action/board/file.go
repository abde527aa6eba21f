package board

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// A board's state file, action-<UUID>.json in the log directory, keeps its
// repair history across restarts and reboots (action.History): the
// critical classes of each boot and the last acknowledgement. It is
// written whole (sink.WriteFileAtomic: a crash leaves the old file or the new)
// and read without following a symbolic link (sink.OpenOwnRegular): a link
// planted in the log directory is refused, never read or written through.

// maxFile bounds what is read of a state file: MaxBoots boots of a
// few classes each are a few KiB.
const maxFile = 256 << 10

// Path returns the state file of the board with uuid in dir. A
// UUID with anything but letters, digits and '-' (NVML's are
// "GPU-8ca3f2a1-...") is refused: it names a file.
func Path(dir, uuid string) (string, error) {
	if uuid == "" || strings.Trim(uuid, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") != "" {
		return "", fmt.Errorf("board state: %q is not a UUID", uuid)
	}
	return filepath.Join(dir, "action-"+uuid+".json"), nil
}

// Stored returns the UUIDs of the boards with a state file in dir.
func Stored(dir string) []string {
	paths, err := filepath.Glob(filepath.Join(dir, "action-*.json"))
	if err != nil {
		return nil
	}
	uuids := make([]string, len(paths))
	for i, p := range paths {
		uuids[i] = strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "action-"), ".json")
	}
	return uuids
}

// Read returns the history of the board with uuid in dir: zero
// (with its UUID) when there is none yet.
func Read(dir, uuid string) (action.History, error) {
	h := action.History{UUID: uuid}
	p, err := Path(dir, uuid)
	if err != nil {
		return h, err
	}
	b, err := sink.ReadBounded(sink.OpenOwnRegular, p, maxFile, false)
	if errors.Is(err, fs.ErrNotExist) {
		return h, nil
	}
	if err != nil {
		return h, fmt.Errorf("read %s: %w", filepath.Base(p), err)
	}
	var got action.History
	if err := json.Unmarshal(b, &got); err != nil {
		return h, fmt.Errorf("read %s: %w", filepath.Base(p), err)
	}
	if got.UUID != uuid {
		return h, fmt.Errorf("read %s: it is the state of %q", filepath.Base(p), got.UUID)
	}
	return got, nil
}

// Write replaces the state file of h's board in dir, atomically.
func Write(dir string, h action.History) error {
	p, err := Path(dir, h.UUID)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return err
	}
	return sink.WriteFileAtomic(p, append(b, '\n'), 0o644)
}

// SetAside renames the state file of the board with uuid in dir,
// one that did not read (corrupt, another board's, a link), to
// action-<UUID>.json.corrupt-<time>: the new history written in its place
// does not destroy the evidence. It returns the new path.
func SetAside(dir, uuid string, t time.Time) (string, error) {
	p, err := Path(dir, uuid)
	if err != nil {
		return "", err
	}
	to := p + ".corrupt-" + t.UTC().Format("20060102T150405.000Z")
	if err := os.Rename(p, to); err != nil {
		return "", fmt.Errorf("set aside %s: %w", filepath.Base(p), err)
	}
	return to, nil
}
