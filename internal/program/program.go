package program

import (
	"encoding/json"
	"fmt"
	"time"
)

// Defaults and bounds of Limits and Options. A zero field takes its
// default; a field over its Max is cut to it.
const (
	// DefaultMemory is each program's memory budget: how much more its
	// process may map than it had at rest. Generous for data shaping of
	// tool results (a few MiB each), small enough that Concurrency of them
	// fit beside a worker.
	DefaultMemory = 256 << 20
	// DefaultTime bounds one Run: the interpreter's work between two
	// batches of calls is short; a program that computes for seconds is
	// looping. Tool calls run between Runs and do not count.
	DefaultTime = 5 * time.Second
	MaxTime     = time.Minute
	// DefaultCalls bounds the tool calls of a program, counted from its
	// start (recorded calls included): each is a real tool call, with its
	// cost and its row in the turn's steps.
	DefaultCalls = 1000
	MaxCalls     = 10000
	// DefaultOutput bounds the console output and the return value
	// together, in bytes: both go back to the model.
	DefaultOutput = 1 << 20
	MaxOutput     = 16 << 20
	// MaxSource bounds a program's source in bytes: a model writes short
	// programs; a long one is data that belongs in a tool's result.
	MaxSource = 64 << 10
	// MaxArgs bounds one call's arguments as JSON, in bytes.
	MaxArgs = 1 << 20
	// DefaultRead bounds the data a program reads with data.read, all its
	// reads together, in bytes of JSON: parsed, data takes several times
	// its size of the program's memory, and DefaultMemory must hold it.
	DefaultRead = 8 << 20
	MaxRead     = 64 << 20
	// MaxReads bounds the distinct refs a program reads: each new one
	// costs its run a stop and a start.
	MaxReads = 100
	// DefaultConcurrency is the most programs that run at once.
	DefaultConcurrency = 4
)

// Tool is a tool the program may call as tools.<Name>(args).
type Tool struct {
	// Name must be a JavaScript identifier (letters, digits, _ and $, not
	// starting with a digit).
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments; this package does
	// not check arguments against it (the tool runtime does, when the
	// turn makes the call), it only describes them (see Declarations).
	Parameters json.RawMessage
}

// Call is a tool call the program made and is waiting on.
type Call struct {
	// N numbers the program's calls in the order it made them, from 0.
	N    int
	Tool string
	// Args is the argument as canonical JSON (object keys sorted, no
	// spaces): what a recording is compared against.
	Args json.RawMessage
}

// Recorded is the result of call N, as the turn recorded it.
type Recorded struct {
	N    int
	Tool string
	Args json.RawMessage
	// Result is the call's JSON result; the program's promise resolves to
	// it. Ignored when Error is set.
	Result json.RawMessage
	// Error, when set, rejects the program's promise with an Error whose
	// message it is.
	Error string
}

// Limits bound one program. Zero fields take the defaults.
type Limits struct {
	// Time bounds each Run's interpreter work. Default DefaultTime.
	Time time.Duration
	// Calls bounds the calls the program makes, from its start. Default
	// DefaultCalls.
	Calls int
	// Output bounds the console output and the return value together, in
	// bytes. Default DefaultOutput.
	Output int
	// Read bounds the data the program reads (data.read), all its reads
	// together, in bytes of JSON. Default DefaultRead.
	Read int
}

// Read is what the caller read of a ref the program asked for with
// data.read (Outcome.Reads): the data as JSON, or the error that rejects
// the read's promise, or, for data over Limits.Read, only its size.
type Read struct {
	Ref string
	// Data is the data as JSON; empty when Error is set or the data is
	// too large to send (Bytes says how large).
	Data json.RawMessage
	// Bytes is the data's size as JSON, counted against Limits.Read.
	Bytes int
	// Error, when set, rejects the read's promise with an Error whose
	// message it is.
	Error string
	// Held is set by Run on reads past Limits.Read, all together, whose
	// Data it kept back: the program ends when it reads one.
	Held bool
}

// Input is one run of a program.
type Input struct {
	// Source is the body of an async function: top-level await and
	// return work.
	Source string
	Tools  []Tool
	// Recorded are the results of the program's earlier calls, in any
	// order.
	Recorded []Recorded
	// Now is what Date sees as the current time, on every run (the turn's
	// start, say).
	Now time.Time
	// Seed seeds Math.random.
	Seed int64
	// Input is the program's input global; null when empty.
	Input json.RawMessage
	// Reads answer the program's data.read calls by ref. Data behind a
	// ref is content-addressed (cas://) or written once (artifact://), so
	// the caller reads it again for each Run rather than record it: the
	// same ref gives the same data on every run.
	Reads  []Read
	Limits Limits
}

// Outcome is where a Run left the program: Done, or waiting on Pending.
type Outcome struct {
	Done bool
	// Pending are the calls the program waits on, in call order, when it
	// is not Done.
	Pending []Call
	// Value is the program's return value as JSON (null when it returned
	// nothing), when Done.
	Value json.RawMessage
	// Console is what the program printed, one line a call, "warn: " or
	// "error: " before lines of console.warn and console.error.
	Console string
	// Calls is how many calls the program has made, recorded and pending.
	Calls int
	// Reads are the refs the program's data.read calls wait on, in the
	// order it asked, when it is not Done: the caller reads them and
	// runs the program again with them in Input.Reads. Pending may then
	// be empty.
	Reads []string
}

// Kinds of Error.
const (
	KindSyntax  = "syntax"  // the source does not parse
	KindRuntime = "runtime" // the program threw, or its value is not JSON
	KindLimit   = "limit"   // a limit ended it; Limit names which
	KindReplay  = "replay"  // it made a different call on a re-run
)

// Limits of Error.Limit.
const (
	LimitMemory = "memory"
	LimitTime   = "time"
	LimitCalls  = "calls"
	LimitOutput = "output"
	LimitSource = "source"
	LimitRead   = "read"
)

// Error is the program's fault: what the model wrote and can fix. Its
// message is meant for the model. Run's other errors are the runner's.
type Error struct {
	Kind    string
	Limit   string
	Message string
	// Line and Column locate the fault in Source, from 1; 0 when unknown.
	Line, Column int
	// Console is what the program printed before the fault, as in
	// Outcome.Console: often what the model needs to fix it. Empty when
	// the program's process was killed (memory, or time past the grace).
	Console string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s (line %d, column %d)", e.Message, e.Line, e.Column)
	}
	return e.Message
}
