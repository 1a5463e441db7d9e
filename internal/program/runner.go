package program

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/agentflow/agentflow/internal/childproc"
)

// Options configure a Runner. Zero fields take the defaults named on each.
type Options struct {
	// Memory is each program's budget in bytes, capped by the kernel on
	// its child process. It is the Runner's, not a program's: a warm child
	// keeps the cap it started with. Default DefaultMemory.
	Memory int64
	// Concurrency is the most programs that run at once; a Run beyond it
	// waits for a slot as long as its context allows. With Memory it
	// bounds what programs may take of a host. Default DefaultConcurrency.
	Concurrency int
}

// Runner runs programs in child processes, each under a memory budget, at
// most Concurrency at once, and keeps the children that end well for the
// next run. It is safe for concurrent use.
type Runner struct {
	memory int64
	procs  *childproc.Pool
}

// New returns a runner. It starts no process: the first runs do.
func New(o Options) *Runner {
	if o.Memory <= 0 {
		o.Memory = DefaultMemory
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	return &Runner{memory: o.Memory, procs: childproc.NewPool(o.Concurrency)}
}

// The child's side: the variable that makes a process a program child,
// and the protocol it says hello with.
const (
	envBudget = "AGENTFLOW_PROGRAM_CHILD_BUDGET"
	protocol  = "program/1"
)

// Frames after the hello: the parent sends a request, the child answers
// with one result.
const (
	frameRequest = 'r'
	frameResult  = 'o'
)

// result is a child's answer to one request.
type result struct {
	Outcome Outcome `json:"outcome"`
	// Error is the program's fault; Fault a failure of the child's own.
	Error *Error `json:"error,omitempty"`
	Fault string `json:"fault,omitempty"`
	// Retire says the child exits after this run: its heap grew, and a
	// fresh process is smaller than a big idle one.
	Retire bool `json:"retire,omitempty"`
}

// retireBytes: a child whose Go runtime holds more than this after a run,
// or more than half its budget, exits instead of waiting for the next:
// a program stopped by a limit can leave its heap near the budget, and
// the next program, however small, would start with little room.
const retireBytes = 64 << 20

// grace is how long past a run's time limit the parent waits for the
// child's own interrupt before it kills the child: the interrupt is
// checked between instructions, and a builtin (a sort of a large array)
// finishes first.
const grace = time.Second

func init() {
	childproc.Serve(envBudget, "program", protocol, serve)
}

// serve runs one request at a time until the parent closes the pipe.
func serve(r *bufio.Reader, w *bufio.Writer) error {
	// The program's Date shows local time in UTC on every worker,
	// whatever the host's zone.
	time.Local = time.UTC
	retire := uint64(retireBytes)
	if budget, err := strconv.ParseUint(os.Getenv(envBudget), 10, 64); err == nil {
		retire = min(retire, budget/2)
	}
	cache := compiled{}
	for {
		kind, p, err := childproc.ReadFrame(r, 2*MaxSource+MaxRead+(64<<20))
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if kind != frameRequest {
			return fmt.Errorf("got a %q frame, want a request", kind)
		}
		var req request
		var res result
		if err := json.Unmarshal(p, &req); err != nil {
			res.Fault = "decode the request: " + err.Error()
		} else {
			out, err := execute(req.Input, cache)
			var pe *Error
			switch {
			case errors.As(err, &pe):
				res.Error = pe
			case err != nil:
				res.Fault = err.Error()
			default:
				res.Outcome = out
			}
		}
		p = nil
		res.Retire = childproc.HeldBytes() > retire
		b, err := json.Marshal(res)
		if err != nil {
			return fmt.Errorf("encode the result: %w", err)
		}
		if err := childproc.WriteFrame(w, frameResult, b); err != nil {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
		if res.Retire {
			return nil
		}
	}
}

// Run runs the program from its start, answering its calls from
// in.Recorded, until it is Done or waits on calls that have no recorded
// result (Pending). The program's faults — a syntax or runtime error, a
// limit, a call that differs from its recording — are an *Error; any
// other error is the runner's (bad tools, a child that could not start,
// the context's end) and says nothing about the program.
func (r *Runner) Run(ctx context.Context, in Input) (Outcome, error) {
	if len(in.Source) > MaxSource {
		return Outcome{}, &Error{Kind: KindLimit, Limit: LimitSource, Message: fmt.Sprintf(
			"limit: source (%s): the program is %d bytes; write a shorter one, and leave data to the tools", size(MaxSource), len(in.Source))}
	}
	if err := checkTools(in.Tools); err != nil {
		return Outcome{}, err
	}
	if len(in.Input) > 0 && !json.Valid(in.Input) {
		return Outcome{}, errors.New("the program's input is not JSON")
	}
	for _, rec := range in.Recorded {
		if len(rec.Result) > 0 && !json.Valid(rec.Result) {
			return Outcome{}, fmt.Errorf("recorded call %d: its result is not JSON", rec.N)
		}
	}
	in.Limits = in.Limits.resolve()
	reads, err := sized(in.Reads, in.Limits.Read)
	if err != nil {
		return Outcome{}, err
	}
	in.Reads = reads
	payload, err := json.Marshal(request{Input: in})
	if err != nil {
		return Outcome{}, fmt.Errorf("encode the program's input: %w", err)
	}
	release, err := r.procs.Acquire(ctx)
	if err != nil {
		return Outcome{}, fmt.Errorf("wait for a program slot (%d run at once): %w", r.procs.Slots(), err)
	}
	defer release()
	c, err := r.get(ctx)
	if err != nil {
		return Outcome{}, err
	}
	runCtx, cancel := context.WithTimeout(ctx, in.Limits.Time+grace)
	defer cancel()
	stop := context.AfterFunc(runCtx, c.Kill)
	res, err := r.exchange(c, payload)
	killed := !stop()
	switch {
	case killed && err == nil: // the run ended as the kill came
		c.Close()
	case killed:
		c.Close()
		if ctx.Err() != nil {
			return Outcome{}, ctx.Err()
		}
		return Outcome{}, limitError(LimitTime, in.Limits)
	case errors.Is(err, errDied):
		return Outcome{}, c.Reap("program process", r.deathCause)
	case err != nil:
		c.Close()
		return Outcome{}, err
	}
	switch {
	case killed:
	case res.Retire:
		c.Close()
	default:
		r.procs.Put(c)
	}
	switch {
	case res.Error != nil:
		return Outcome{}, res.Error
	case res.Fault != "":
		return Outcome{}, fmt.Errorf("program process: %s", res.Fault)
	}
	return res.Outcome, nil
}

// errDied says the child's pipe broke: it died or was killed mid-run.
var errDied = errors.New("program process died")

// exchange sends one request and reads its result.
func (r *Runner) exchange(c *childproc.Proc, payload []byte) (result, error) {
	if err := childproc.WriteFrame(c.W, frameRequest, payload); err != nil {
		return result{}, errDied
	}
	if err := c.W.Flush(); err != nil {
		return result{}, errDied
	}
	// The child's memory bounds what it can send; twice that allows for
	// JSON's escapes of the console output.
	kind, p, err := childproc.ReadFrame(c.R, int(min(2*r.memory, 1<<30)))
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return result{}, errDied
	case err != nil:
		return result{}, fmt.Errorf("read from the program process: %w", err)
	case kind != frameResult:
		return result{}, fmt.Errorf("program process sent a %q frame, want a result", kind)
	}
	var res result
	if err := json.Unmarshal(p, &res); err != nil {
		return result{}, fmt.Errorf("program process sent a result that does not decode: %w", err)
	}
	return res, nil
}

// deathCause says why a child died mid-run, the parent not having killed
// it (childproc.Cause). Its cap is the usual cause: the kernel refuses a
// mapping and the runtime ends the process. goja is pure Go, so a crash
// that is not a panic is the runtime's, for want of memory.
func (r *Runner) deathCause(code int, stderr string) error {
	return childproc.Cause(code, stderr, "program process", r.memoryError(), func(line string) error {
		return fmt.Errorf("program process crashed: %s", line)
	})
}

func (r *Runner) memoryError() *Error {
	return &Error{Kind: KindLimit, Limit: LimitMemory, Message: fmt.Sprintf(
		"limit: memory (%s): the program built more than it may hold; work on less data at once", size(r.memory))}
}

// resolve gives zero limits their defaults and cuts the rest to their
// bounds.
func (l Limits) resolve() Limits {
	l.Time = bounded(l.Time, DefaultTime, MaxTime)
	l.Calls = bounded(l.Calls, DefaultCalls, MaxCalls)
	l.Output = bounded(l.Output, DefaultOutput, MaxOutput)
	l.Read = bounded(l.Read, DefaultRead, MaxRead)
	return l
}

// bounded is v, or def when v is not set (zero or less), at most most.
func bounded[T int | int64 | time.Duration](v, def, most T) T {
	if v <= 0 {
		v = def
	}
	return min(v, most)
}

// sized checks the reads and measures their data: the data of reads past
// limit, all together, stays with the caller (the program stops at the
// first of them with a read limit), so a child is never sent more than
// the limit.
func sized(reads []Read, limit int) ([]Read, error) {
	out := make([]Read, len(reads))
	total := 0
	for i, r := range reads {
		if len(r.Data) > 0 {
			if !json.Valid(r.Data) {
				return nil, fmt.Errorf("the read of %s is not JSON", r.Ref)
			}
			r.Bytes = len(r.Data)
		}
		if r.Error == "" {
			total += r.Bytes
		}
		r.Held = total > limit
		if r.Held {
			r.Data = nil
		}
		out[i] = r
	}
	return out, nil
}

// checkTools refuses tool names a program could not call as
// tools.<name>, or that name two tools.
func checkTools(tools []Tool) error {
	seen := make(map[string]bool, len(tools))
	for _, t := range tools {
		if !identifier(t.Name) {
			return fmt.Errorf("tool name %q is not a JavaScript identifier", t.Name)
		}
		if seen[t.Name] {
			return fmt.Errorf("tool %q is given twice", t.Name)
		}
		seen[t.Name] = true
	}
	return nil
}

// get returns an idle child that is still alive, or starts one.
func (r *Runner) get(ctx context.Context) (*childproc.Proc, error) {
	c, err := r.procs.Get(ctx, func(ctx context.Context) (*childproc.Proc, error) {
		c, err := childproc.Start(ctx, childproc.Config{Env: envBudget, Name: "agentflow-program", Protocol: protocol, Memory: r.memory})
		if err != nil && ctx.Err() == nil {
			err = fmt.Errorf("start a program process: %w", err)
		}
		return c, err
	})
	if errors.Is(err, childproc.ErrClosed) {
		return nil, errors.New("program runner is closed")
	}
	return c, err
}

// Close ends the idle children, as childproc.Pool.Close does.
func (r *Runner) Close() error {
	r.procs.Close()
	return nil
}
