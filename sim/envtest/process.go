package envtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// deathWrapper writes a script that runs binary with SIGKILL as its parent
// death signal (util-linux setpriv), so a control-plane process dies with
// the test binary that started it, even on a panic, a test timeout or
// SIGKILL. Without setpriv it returns binary itself.
func deathWrapper(dir, binary string) (string, error) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return binary, nil
	}
	path := filepath.Join(dir, filepath.Base(binary))
	script := fmt.Sprintf("#!/bin/sh\nexec %s --pdeathsig KILL -- %s \"$@\"\n", setpriv, binary)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		return "", err
	}
	return path, nil
}

// findProcess returns the pid and command line of the one process whose
// command line holds marker.
func findProcess(marker string) (int, []string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, nil, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if slices.Contains(args, marker) {
			return pid, args, nil
		}
	}
	return 0, nil, fmt.Errorf("no process with %s", marker)
}
