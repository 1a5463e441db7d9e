package childproc

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// capMemory sets RLIMIT_DATA to what the process maps now plus budget.
//
// RLIMIT_DATA, not RLIMIT_AS: since Linux 4.7 RLIMIT_DATA counts private
// writable mappings, which is what the Go heap is once the runtime maps it
// for use, while RLIMIT_AS also counts the address space the runtime
// reserves and never touches (arenas are reserved 64 MiB at a time, and a
// race-enabled binary reserves terabytes of shadow). Measured on the jq
// bombs with a 256 MiB budget: under RLIMIT_DATA the child's peak RSS
// reached 247-256 MiB before it was refused; under RLIMIT_AS it was
// refused at 133-195 MiB, and a race-enabled child doing honest work at
// 150 MiB was refused too. The base is read, not assumed, because it
// differs by binary (and by a lot under the race detector).
//
// Under the race detector ThreadSanitizer maps shadow for each new heap
// mapping, about eight times its size, and the cap counts that too: a
// race-enabled binary's programs get about an eighth of the budget for
// one large value (an 80 MB string needed 640 MiB). The cap is left so:
// such binaries are tests, and the bombs stay bounded there as well.
func capMemory(budget int64) error {
	base, err := mappedData()
	if err != nil {
		return err
	}
	limit := uint64(base + budget)
	var cur syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_DATA, &cur); err != nil {
		return fmt.Errorf("getrlimit: %w", err)
	}
	// Both soft and hard: nothing in the child may raise it again. A
	// stricter limit set by the operator stays.
	limit = min(limit, cur.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_DATA, &syscall.Rlimit{Cur: limit, Max: limit}); err != nil {
		return fmt.Errorf("setrlimit RLIMIT_DATA %d: %w", limit, err)
	}
	return nil
}

// mappedData is VmData of /proc/self/status in bytes: the size RLIMIT_DATA
// is checked against.
func mappedData() (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmData:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("VmData %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no VmData in /proc/self/status")
}

// self is the executable a child runs: /proc/self/exe is this process's
// own image even when the file was replaced or deleted since (a deploy),
// which os.Executable's path is not.
func self() (string, error) { return "/proc/self/exe", nil }

// sysProcAttr puts a child in its own process group, so that a terminal's
// Ctrl-C reaches the parent only (which then ends its runs), and has the
// kernel kill it when the parent dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
