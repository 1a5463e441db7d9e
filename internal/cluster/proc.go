package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is a program run on a host, its output appended to a log file,
// that can be stopped, killed and started again with the same command.
type Proc struct {
	Name string
	Host *Host
	// Log is the path of its log file.
	Log string

	argv []string
	env  []string
	dir  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	err  error // how the last run ended, set before done is closed
}

// NewProc is argv run on host as cred (nil: as this process), in dir,
// with env added to this process's environment, logging to dir/name.log.
func (h *Host) NewProc(name, dir string, argv []string, cred *syscall.Credential, env ...string) *Proc {
	return &Proc{Name: name, Host: h, Log: filepath.Join(dir, name+".log"), argv: h.Argv(argv, cred), env: env, dir: dir}
}

// Start starts the program; it is an error when it runs.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running() {
		return fmt.Errorf("%s is running", p.Name)
	}
	log, err := os.OpenFile(p.Log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("open %s log: %w", p.Name, err)
	}
	defer log.Close() // the child holds its own descriptor
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = p.dir, log, log
	cmd.Env = append(os.Environ(), p.env...)
	// Own group, and killed with this process: a cluster never outlives
	// the trial or the command that made it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	go func() { p.err = cmd.Wait(); close(done) }()
	p.cmd, p.done = cmd, done
	return nil
}

// Exited returns how the program ended, or nil while it runs.
func (p *Proc) Exited() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil || p.running() {
		return nil
	}
	return fmt.Errorf("%s exited (%v): %s", p.Name, p.err, tail(p.Log))
}

// Running reports whether the program runs.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running()
}

func (p *Proc) running() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Kill ends the program with SIGKILL, as a crash would, and waits for it.
func (p *Proc) Kill() { p.Signal(syscall.SIGKILL, 0) }

// Signal sends sig and waits for the program to end, killing it after
// grace (0: waits without end).
func (p *Proc) Signal(sig syscall.Signal, grace time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running() {
		return
	}
	// The group: a program that forks (postgres) goes with its children.
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	if grace > 0 {
		select {
		case <-p.done:
			return
		case <-time.After(grace):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	<-p.done
}

// tail is the end of the log at path, for an error.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log)"
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 2000 {
		s = "…" + s[len(s)-2000:]
	}
	return s
}
