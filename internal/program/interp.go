package program

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/agentflow/agentflow/internal/words"
	"github.com/dop251/goja"
)

// filename is the program's name in the interpreter's positions.
const filename = "program.js"

// The wrapper makes the source the body of an async function: one line
// before it, so a position's line is one more than the user's.
const (
	wrapHead = "(async function() {\n"
	wrapTail = "\n})"
)

// maxStack bounds the interpreter's call depth: a runaway recursion ends
// as a runtime error long before it takes the memory budget.
const maxStack = 10000

// maxMessage bounds an error message that goes back to the model: a
// program can throw any string it builds.
const maxMessage = 4 << 10

// request is what the parent sends a child: the input with its limits
// resolved.
type request struct {
	Input Input `json:"input"`
}

// stop is what ends a run from outside the program's own code: an
// interrupt carries it, so that try/catch in the program cannot swallow a
// limit or a replay fault.
type stop struct{ err *Error }

func (s *stop) Error() string { return s.err.Message }

// call is one tool call or data.read the program made, with its
// promise.
type call struct {
	Call                   // a tool call; zero for a read
	ref             string // a data.read: the ref it reads
	resolve, reject func(any) error
}

// interp is one run of a program.
type interp struct {
	vm       *goja.Runtime
	in       Input
	recorded map[int]Recorded
	reads    map[string]Read
	// waits are the tool calls and reads in the order the program made
	// them; made counts the tool calls (the next one's N), asked the
	// refs read, read the bytes read.
	waits   []call
	made    int
	asked   map[string]bool
	read    int
	console bytes.Buffer
	stopped *Error // set once a limit or a replay fault ended the run
	// The JSON functions as they were before the program ran: it may
	// replace the globals, not what crosses to Go.
	stringify, parseJSON goja.Callable
}

// execute runs the program from its start until it is Done or waits on
// calls that have no recorded result. It runs in a child process: the
// caller bounds its memory; it bounds its own time.
func execute(in Input, cache compiled) (Outcome, error) {
	prog, err := cache.compile(in.Source)
	if err != nil {
		return Outcome{}, syntaxError(err)
	}
	it := &interp{vm: goja.New(), in: in, recorded: make(map[int]Recorded, len(in.Recorded)),
		reads: make(map[string]Read, len(in.Reads)), asked: map[string]bool{}}
	for _, r := range in.Recorded {
		it.recorded[r.N] = r
	}
	for _, r := range in.Reads {
		it.reads[r.Ref] = r
	}
	if err := it.setup(); err != nil {
		return Outcome{}, err
	}
	timer := time.AfterFunc(in.Limits.Time, func() {
		it.vm.Interrupt(&stop{limitError(LimitTime, in.Limits)})
	})
	defer timer.Stop()
	out, err := it.run(prog)
	if e, ok := err.(*Error); ok {
		e.Console = it.console.String()
	}
	return out, err
}

// compiled keeps a child's recently compiled programs: a program is run
// again after each batch of its calls, and compiling it costs a tenth of
// a small run. A compiled program is not tied to a runtime.
type compiled map[string]*goja.Program

// maxCompiled bounds a compiled cache; when full it starts over.
const maxCompiled = 64

func (c compiled) compile(source string) (*goja.Program, error) {
	if p, ok := c[source]; ok {
		return p, nil
	}
	p, err := goja.Compile(filename, wrapHead+source+wrapTail, false)
	if err != nil {
		return nil, err
	}
	if c != nil {
		if len(c) >= maxCompiled {
			clear(c)
		}
		c[source] = p
	}
	return p, nil
}

// setup gives the program its globals and nothing else of the world.
func (it *interp) setup() error {
	vm := it.vm
	vm.SetMaxCallStackSize(maxStack)
	now := it.in.Now
	vm.SetTimeSource(func() time.Time { return now })
	seed := uint64(it.in.Seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	vm.SetRandSource(rng.Float64)
	builtin := vm.Get("JSON").ToObject(vm)
	var ok1, ok2 bool
	it.stringify, ok1 = goja.AssertFunction(builtin.Get("stringify"))
	it.parseJSON, ok2 = goja.AssertFunction(builtin.Get("parse"))
	if !ok1 || !ok2 {
		return errors.New("the interpreter has no JSON")
	}

	tools := vm.NewObject()
	for _, t := range it.in.Tools {
		if err := tools.Set(t.Name, it.tool(t.Name)); err != nil {
			return fmt.Errorf("tool %s: %w", t.Name, err)
		}
	}
	console := vm.NewObject()
	for name, prefix := range map[string]string{"log": "", "info": "", "warn": "warn: ", "error": "error: "} {
		if err := console.Set(name, it.print(prefix)); err != nil {
			return err
		}
	}
	data := vm.NewObject()
	if err := data.Set("read", it.readData); err != nil {
		return err
	}
	var input any
	if len(it.in.Input) > 0 {
		v, err := it.parse(it.in.Input)
		if err != nil {
			return fmt.Errorf("input is not JSON: %w", err)
		}
		input = v
	}
	for name, v := range map[string]any{"tools": tools, "console": console, "data": data, "input": input} {
		if err := vm.Set(name, v); err != nil {
			return err
		}
	}
	return nil
}

// halt ends the run with err at the program's next instruction.
func (it *interp) halt(err *Error) {
	if it.stopped == nil {
		it.stopped = err
		it.vm.Interrupt(&stop{err})
	}
}

// tool is tools.<name>: it numbers the call, checks it against its
// recording and returns a promise that the batch's end settles.
func (it *interp) tool(name string) func(goja.FunctionCall) goja.Value {
	return func(fc goja.FunctionCall) goja.Value {
		if it.stopped != nil {
			return goja.Undefined()
		}
		arg := fc.Argument(0)
		if goja.IsUndefined(arg) {
			arg = it.vm.NewObject()
		}
		args, err := it.json(arg)
		if err != nil {
			panic(it.vm.NewTypeError("tools.%s: the arguments are not JSON: %v", name, err))
		}
		if len(args) > MaxArgs {
			panic(it.vm.NewTypeError("tools.%s: the arguments are %d bytes of JSON, over the %d allowed", name, len(args), MaxArgs))
		}
		n := it.made
		if n >= it.in.Limits.Calls {
			it.halt(limitError(LimitCalls, it.in.Limits))
			return goja.Undefined()
		}
		c := Call{N: n, Tool: name, Args: args}
		if r, ok := it.recorded[n]; ok && (r.Tool != c.Tool || !sameJSON(r.Args, c.Args)) {
			it.halt(&Error{Kind: KindReplay, Message: fmt.Sprintf(
				"the program made a different call on its re-run: call %d is %s(%s), recorded as %s(%s); a program must make the same calls in the same order every time it runs",
				n, c.Tool, words.Clip(string(c.Args), 200), r.Tool, words.Clip(string(r.Args), 200))})
			return goja.Undefined()
		}
		p, resolve, reject := it.vm.NewPromise()
		it.waits = append(it.waits, call{Call: c, resolve: resolve, reject: reject})
		it.made++
		return it.vm.ToValue(p)
	}
}

// maxRef bounds a ref the program passes to data.read.
const maxRef = 1 << 10

// readData is data.read(ref): a promise of the data behind ref (a string,
// or an object whose ref field is one: a tool's result kept by
// reference), which the batch's end settles, as a tool call's.
func (it *interp) readData(fc goja.FunctionCall) goja.Value {
	if it.stopped != nil {
		return goja.Undefined()
	}
	arg := fc.Argument(0)
	if o, ok := arg.(*goja.Object); ok {
		arg = o.Get("ref")
	}
	if arg == nil || !goja.IsString(arg) || arg.String() == "" || len(arg.String()) > maxRef {
		panic(it.vm.NewTypeError("data.read: pass a ref (\"cas://sha256:…\") or a tool's result that has one ({ref: …})"))
	}
	ref := arg.String()
	if !it.asked[ref] {
		if len(it.asked) >= MaxReads {
			it.halt(&Error{Kind: KindLimit, Limit: LimitRead, Message: fmt.Sprintf(
				"limit: read (%d refs): the program may read at most %d refs; read fewer, or have a tool combine the data", MaxReads, MaxReads)})
			return goja.Undefined()
		}
		it.asked[ref] = true
	}
	p, resolve, reject := it.vm.NewPromise()
	it.waits = append(it.waits, call{ref: ref, resolve: resolve, reject: reject})
	return it.vm.ToValue(p)
}

// print is a console method: it appends a line and ends the run as soon
// as the output passes its limit.
func (it *interp) print(prefix string) func(goja.FunctionCall) goja.Value {
	return func(fc goja.FunctionCall) goja.Value {
		if it.stopped != nil {
			return goja.Undefined()
		}
		// Each piece is measured before it is copied: a line of 100 MB
		// ends the run without a second copy of it.
		over := func(n int) bool { return it.console.Len()+n > it.in.Limits.Output }
		var line strings.Builder
		line.WriteString(prefix)
		for i, a := range fc.Arguments {
			if i > 0 {
				line.WriteByte(' ')
			}
			t := it.text(a)
			if over(line.Len() + len(t) + 1) {
				it.halt(limitError(LimitOutput, it.in.Limits))
				return goja.Undefined()
			}
			line.WriteString(t)
		}
		line.WriteByte('\n')
		if over(line.Len()) {
			it.halt(limitError(LimitOutput, it.in.Limits))
			return goja.Undefined()
		}
		it.console.WriteString(line.String())
		return goja.Undefined()
	}
}

// text is how console shows a value: strings as they are, objects as
// JSON, the rest as JavaScript writes them.
func (it *interp) text(v goja.Value) string {
	if goja.IsString(v) {
		return v.String()
	}
	if o, ok := v.(*goja.Object); ok {
		if _, isFn := goja.AssertFunction(o); !isFn && o.ClassName() != "Error" {
			if b, err := it.json(v); err == nil {
				return string(b)
			}
		}
	}
	return v.String()
}

// json is v as canonical JSON: JSON.stringify, then keys sorted and
// numbers kept as written.
func (it *interp) json(v goja.Value) (json.RawMessage, error) {
	s, err := it.stringify(goja.Undefined(), v)
	if err != nil {
		return nil, err
	}
	if goja.IsUndefined(s) {
		return json.RawMessage("null"), nil
	}
	return canonical([]byte(s.String()))
}

// run calls the program, then answers its calls a batch at a time while
// every call of the batch has a recorded result.
func (it *interp) run(prog *goja.Program) (Outcome, error) {
	fnv, err := it.vm.RunProgram(prog)
	if err != nil {
		return Outcome{}, it.fault(err)
	}
	fn, ok := goja.AssertFunction(fnv)
	if !ok {
		return Outcome{}, &Error{Kind: KindSyntax, Message: "the program is not the body of a function (does it close a brace it did not open?)"}
	}
	pv, err := fn(goja.Undefined())
	if err != nil {
		return Outcome{}, it.fault(err)
	}
	top, ok := pv.Export().(*goja.Promise)
	if !ok {
		return Outcome{}, &Error{Kind: KindSyntax, Message: "the program is not the body of a function (does it close a brace it did not open?)"}
	}
	delivered := 0
	for top.State() == goja.PromiseStatePending {
		if it.stopped != nil {
			return Outcome{}, it.stopped
		}
		batch := it.waits[delivered:]
		if len(batch) == 0 {
			return Outcome{}, &Error{Kind: KindRuntime, Message: "the program waits on a promise that no tool call settles: it can never finish"}
		}
		pending, reads := it.unanswered(batch)
		if len(pending) > 0 || len(reads) > 0 {
			return Outcome{Pending: pending, Reads: reads, Console: it.console.String(), Calls: it.made}, nil
		}
		if err := it.countReads(batch); err != nil {
			return Outcome{}, err
		}
		end := len(it.waits)
		if err := it.answer(batch); err != nil {
			return Outcome{}, it.fault(err)
		}
		delivered = end
	}
	if it.stopped != nil {
		return Outcome{}, it.stopped
	}
	if len(it.recorded) > it.made {
		return Outcome{}, &Error{Kind: KindReplay, Message: fmt.Sprintf(
			"the program made a different call on its re-run: it finished after %d calls, but %d were recorded", it.made, len(it.recorded))}
	}
	if top.State() == goja.PromiseStateRejected {
		return Outcome{}, it.thrown(top.Result())
	}
	value, err := it.json(top.Result())
	if err != nil {
		return Outcome{}, &Error{Kind: KindRuntime, Message: "the program's return value is not JSON: " + words.Clip(err.Error(), maxMessage)}
	}
	if it.console.Len()+len(value) > it.in.Limits.Output {
		return Outcome{}, limitError(LimitOutput, it.in.Limits)
	}
	return Outcome{Done: true, Value: value, Console: it.console.String(), Calls: it.made}, nil
}

// unanswered returns the batch's calls that have no recorded result and
// the refs it reads that were not read, each once.
func (it *interp) unanswered(batch []call) (pending []Call, reads []string) {
	seen := map[string]bool{}
	for _, c := range batch {
		switch {
		case c.ref == "":
			if _, ok := it.recorded[c.N]; !ok {
				pending = append(pending, c.Call)
			}
		case !seen[c.ref]:
			seen[c.ref] = true
			if _, ok := it.reads[c.ref]; !ok {
				reads = append(reads, c.ref)
			}
		}
	}
	return pending, reads
}

// countReads counts the batch's reads against Limits.Read before any is
// answered: data over the limit never reaches the program.
func (it *interp) countReads(batch []call) error {
	for _, c := range batch {
		r := it.reads[c.ref]
		if c.ref == "" || r.Error != "" {
			continue
		}
		it.read += r.Bytes
		// Data the caller kept back (Runner.Run: past the limit) is over
		// it however the program ordered its reads.
		if it.read > it.in.Limits.Read || r.Held {
			return &Error{Kind: KindLimit, Limit: LimitRead, Message: fmt.Sprintf(
				"limit: read (%s): data.read(%q) is %d bytes of JSON, more than the program may read with what it read before; read less at once: ask the tool for fewer rows or fields, or a page at a time",
				size(int64(it.in.Limits.Read)), words.Clip(c.ref, 200), r.Bytes)}
		}
	}
	return nil
}

// answer settles the batch's promises from their recordings, inside one
// call into the interpreter: the jobs they queue run when it returns, all
// of them after every answer, as they would have had the results come
// back together. (A promise settled from Go outside a call would run its
// jobs at once, before the next answer.)
func (it *interp) answer(batch []call) error {
	var failed error
	deliver := func(goja.FunctionCall) goja.Value {
		for _, c := range batch {
			result, msg, what := it.recorded[c.N].Result, it.recorded[c.N].Error, fmt.Sprintf("call %d", c.N)
			if c.ref != "" {
				r := it.reads[c.ref]
				result, msg, what = r.Data, r.Error, "the read of "+c.ref
			}
			var err error
			if msg != "" {
				err = c.reject(it.vm.NewGoError(errors.New(msg)))
			} else {
				var v goja.Value
				if v, err = it.parse(result); err == nil {
					err = c.resolve(v)
				}
			}
			if err != nil {
				failed = fmt.Errorf("answer %s: %w", what, err)
				break
			}
		}
		return goja.Undefined()
	}
	fn, _ := goja.AssertFunction(it.vm.ToValue(deliver))
	if _, err := fn(goja.Undefined()); err != nil {
		return err
	}
	return failed
}

// parse turns a recorded result into a JavaScript value.
func (it *interp) parse(raw json.RawMessage) (goja.Value, error) {
	if len(raw) == 0 {
		return goja.Null(), nil
	}
	return it.parseJSON(goja.Undefined(), it.vm.ToValue(string(raw)))
}

// canonical re-encodes JSON with object keys sorted and no spaces,
// numbers as they were written.
func canonical(b []byte) (json.RawMessage, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("more than one JSON value")
	}
	var out bytes.Buffer
	e := json.NewEncoder(&out)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}

// sameJSON reports whether two JSON texts are the same value as
// canonical JSON.
func sameJSON(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true // the usual case: a recording keeps Call.Args as they were
	}
	ca, err := canonical(a)
	if err != nil {
		return false
	}
	cb, err := canonical(b)
	return err == nil && bytes.Equal(ca, cb)
}
