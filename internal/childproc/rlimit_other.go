//go:build !linux

package childproc

import (
	"os"
	"syscall"
)

// capMemory does nothing here: only Linux counts the Go heap against
// RLIMIT_DATA. A child still runs under the runtime's soft memory limit
// and the parent's timeout, but a program can exceed its budget.
func capMemory(int64) error { return nil }

func self() (string, error) { return os.Executable() }

func sysProcAttr() *syscall.SysProcAttr { return nil }
