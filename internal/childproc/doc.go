// Package childproc runs work in child processes of the current
// executable whose memory the kernel caps: what jq programs (jqproc) and
// code-mode programs (program) need so that a hostile or careless program
// ends itself, never the worker that ran it.
//
// It imports only the standard library, so that a child starts with nothing
// but the work it serves.
//
// # The same executable, re-executed
//
// A child is the parent's own executable (/proc/self/exe) started with a
// package's environment variable set to the memory budget. That package
// calls Serve from its init: Serve sees the variable and turns the process
// into a child that serves requests and exits, instead of returning. So
// every binary that links the package — the worker, the starter's
// in-process worker, each test binary — is its own child with nothing
// added to its main, and parent and child always speak the same protocol
// version. (Docker's pkg/reexec re-executes itself the same way, but needs
// each main to call reexec.Init; here the init of the package that needs
// it is the hook.) In a child, the packages the runtime would initialise
// after that one are never initialised, and main never runs. A child's
// environment holds nothing of the parent's: no secret reaches it.
//
// # The cap
//
// The child sets RLIMIT_DATA to what it maps at start plus the budget,
// before it reads any work, and the Go runtime's soft limit
// (debug.SetMemoryLimit) to the budget, so that the collector works
// harder before the cap refuses memory. RLIMIT_DATA rather than RLIMIT_AS
// because the Go runtime reserves address space it never touches; see
// capMemory for the measurements. Work that goes over is ended by the
// kernel's refusal; the parent sees the child die and MemorySign in its
// stderr.
//
// # Wire
//
// Parent and child talk in frames over two pipes (fds 3 and 4 of the
// child; stdout is not used, so that nothing a package prints can garble
// a frame): a kind byte, a big-endian uint32 length, the payload. The
// child's first frame is FrameHello with the protocol name its package
// gave; what follows is the package's own.
//
// # Warm children
//
// Pool bounds how many children work at once and keeps those that ended
// a run in step for the next. It holds Procs only: what a package keeps
// per child (jqproc's protocol handle) it makes when it takes one, and
// its tests look inside through Idle and Busy.
package childproc
