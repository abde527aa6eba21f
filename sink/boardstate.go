package sink

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
)

// A board's state file, action-<UUID>.json in the log directory, keeps its
// repair history across restarts and reboots (action.History): the
// critical classes of each boot and the last acknowledgement. It is
// written whole (WriteFileAtomic: a crash leaves the old file or the new)
// and read without following a symbolic link (OpenOwnRegular): a link
// planted in the log directory is refused, never read or written through.

// boardStateMax bounds what is read of a state file: MaxBoots boots of a
// few classes each are a few KiB.
const boardStateMax = 256 << 10

// BoardStatePath returns the state file of the board with uuid in dir. A
// UUID with anything but letters, digits and '-' (NVML's are
// "GPU-8ca3f2a1-...") is refused: it names a file.
func BoardStatePath(dir, uuid string) (string, error) {
	if uuid == "" || strings.Trim(uuid, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") != "" {
		return "", fmt.Errorf("board state: %q is not a UUID", uuid)
	}
	return filepath.Join(dir, "action-"+uuid+".json"), nil
}

// ReadBoardState returns the history of the board with uuid in dir: zero
// (with its UUID) when there is none yet.
func ReadBoardState(dir, uuid string) (action.History, error) {
	h := action.History{UUID: uuid}
	p, err := BoardStatePath(dir, uuid)
	if err != nil {
		return h, err
	}
	b, err := ReadBounded(OpenOwnRegular, p, boardStateMax, false)
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

// WriteBoardState replaces the state file of h's board in dir, atomically.
func WriteBoardState(dir string, h action.History) error {
	p, err := BoardStatePath(dir, h.UUID)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(p, append(b, '\n'), 0o644)
}

// SetAsideBoardState renames the state file of the board with uuid in dir,
// one that did not read (corrupt, another board's, a link), to
// action-<UUID>.json.corrupt-<time>: the new history written in its place
// does not destroy the evidence. It returns the new path.
func SetAsideBoardState(dir, uuid string, t time.Time) (string, error) {
	p, err := BoardStatePath(dir, uuid)
	if err != nil {
		return "", err
	}
	to := p + ".corrupt-" + t.UTC().Format("20060102T150405.000Z")
	if err := os.Rename(p, to); err != nil {
		return "", fmt.Errorf("set aside %s: %w", filepath.Base(p), err)
	}
	return to, nil
}
