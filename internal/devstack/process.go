package devstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// service is one server started by a Stack: its process and the lock that
// makes it the only user of its state.
type service struct {
	name    string
	lock    *os.File
	proc    *process
	signal  syscall.Signal // asks for a clean shutdown
	grace   time.Duration  // how long the clean shutdown may take
	logPath string
	argv    []string // how to start it again (see Stack.Restart)
	dir     string
	cred    *syscall.Credential
	ready   func(context.Context) error // answers once the service serves
	// named are the addresses the stack chose for the service's
	// listeners, named (Stack.Listeners).
	named []Listener
}

// start runs sv.argv in dir as cred (nil: as this process).
func (sv *service) start(dir string, cred *syscall.Credential) error {
	sv.dir, sv.cred = dir, cred
	proc, err := startProcess(sv.name, sv.argv, dir, sv.logPath, cred)
	if err != nil {
		return err
	}
	sv.proc = proc
	return nil
}

// stop shuts the process down and releases the lock.
func (sv *service) stop() error {
	var err error
	if sv.proc != nil {
		err = sv.proc.stop(sv.signal, sv.grace)
	}
	if sv.lock != nil {
		// Closing the file releases the flock.
		if cerr := sv.lock.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("release %s lock: %w", sv.name, cerr)
		}
		sv.lock = nil
	}
	return err
}

// process is a child process whose output goes to a log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed once the process has exited and been reaped
	waitErr error         // valid after done is closed
}

// startProcess starts argv in dir with stdout and stderr in a fresh logPath,
// in its own process group, killed by the kernel if this process dies, and
// running as cred when it is not nil.
func startProcess(name string, argv []string, dir, logPath string, cred *syscall.Credential) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	defer logFile.Close() // the child holds its own descriptor

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Own group: a terminal's SIGINT reaches only the parent, which then
		// stops the servers in order.
		Setpgid: true,
		// Set after the credential switch in the child, so it survives it.
		Pdeathsig:  syscall.SIGKILL,
		Credential: cred,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		// Joined through p.done by stop, which every owner calls.
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exitError reports an early exit, quoting the log; nil while running.
func (p *process) exitError() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%v)%s", p.name, p.waitErr, logTail(p.logPath))
	default:
		return nil
	}
}

// stop sends sig, waits up to grace for the process to exit, then kills its
// whole group. A process that already exited on its own is not an error here:
// the start path reports early exits.
func (p *process) stop(sig syscall.Signal, grace time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal %s: %w", p.name, err)
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
		return nil
	case <-timer.C:
	}
	// The leader has not been reaped yet (done is still open), so its pid
	// still names this group.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
	return fmt.Errorf("%s did not stop within %s and was killed%s", p.name, grace, logTail(p.logPath))
}

// logTail returns the last lines of a log file, formatted to end an error
// message, or "" when there is nothing to show.
func logTail(path string) string {
	const maxBytes, maxLines = 4096, 20
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > maxBytes {
		_, _ = f.Seek(-maxBytes, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return fmt.Sprintf("; log %s is empty", path)
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	return fmt.Sprintf("; last lines of %s:\n%s", path, strings.Join(lines, "\n"))
}

// LockFile takes an exclusive flock on path, which it creates; closing the
// file releases it. With wait it blocks until the lock is free or ctx
// ends; without, a held lock is an error wrapping errLocked. Test
// processes that share a machine's folders (a server's state, a cache of
// installed clients) hold one while they change them.
func LockFile(ctx context.Context, path string, wait bool) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if !wait {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, errLocked)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for lock %s: %w", path, ctx.Err())
		case <-ticker.C:
		}
	}
}

var errLocked = errors.New("held by another process")

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago and
// that the kernel will not hand to another bind(":0") for about a minute.
//
// Parallel test binaries all start servers on ports found this way, and the
// Temporal CLI finds its internal ports with bind(":0") too. A port only
// closed again goes straight back into the ephemeral pool, where another
// process can take it before our server binds it (the CLI then panics at
// startup). A connection closed from the listening side leaves the port in
// TIME_WAIT: bind(":0") skips it, while an explicit bind with SO_REUSEADDR,
// which Go, Postgres and Temporal all set, still succeeds. The CLI reserves
// its ports the same way (devserver.GetFreePort).
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		return port, nil // unreserved, still free
	}
	defer c.Close()
	if s, err := l.Accept(); err == nil {
		_ = s.Close() // the listening side closes first and holds TIME_WAIT
	}
	return port, nil
}

// FreeAddr returns "127.0.0.1:port" for a port found as freePort finds it,
// for servers a caller starts itself.
func FreeAddr() (string, error) {
	port, err := freePort()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

// poll calls ready every interval until it returns nil, the process exits,
// or ctx ends; ready's last error explains a timeout.
func poll(ctx context.Context, p *process, interval time.Duration, ready func(context.Context) error) error {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		err := ready(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return p.exitError()
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last error: %v)%s", p.name, ctx.Err(), err, logTail(p.logPath))
		case <-ticker.C:
		}
	}
}
