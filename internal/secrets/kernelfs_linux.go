package secrets

import (
	"os"
	"syscall"
)

// kernelFileSystems are the file systems that show the kernel's state
// (statfs(2) magic numbers): /proc, /sys and what is mounted under /sys.
// A link, a bind mount or a granted folder that leads there is no
// secret's: /proc/self/environ is the worker's whole environment.
var kernelFileSystems = map[int64]string{
	0x9fa0:     "/proc",
	0x62656572: "/sys",
	0x27e0eb:   "/sys (cgroup)",
	0x63677270: "/sys (cgroup2)",
	0x64626720: "/sys (debugfs)",
	0x74726163: "/sys (tracefs)",
	0x73636673: "/sys (securityfs)",
	0xcafe4a11: "/sys (bpf)",
	0xde5e81e4: "/sys (efivarfs)",
	0x62656570: "/sys (configfs)",
	0x6165676c: "/sys (pstore)",
}

// kernelFS names the kernel file system f is on, "" when it is on none.
// A file whose file system cannot be told is taken as one: it is not
// read.
func kernelFS(f *os.File) string {
	var st syscall.Statfs_t
	if err := syscall.Fstatfs(int(f.Fd()), &st); err != nil {
		return "a file system that cannot be told"
	}
	return kernelFileSystems[int64(st.Type)]
}
