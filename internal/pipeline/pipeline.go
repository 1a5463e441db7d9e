package pipeline

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/jqproc"
)

// Op is a step kind: the "step" field of a step.
type Op string

// The ten primitives.
const (
	OpHTTPRequest  Op = "http_request"
	OpTableSort    Op = "table_sort"
	OpTableFilter  Op = "table_filter"
	OpTableSelect  Op = "table_select"
	OpTopK         Op = "top_k"
	OpGroupBy      Op = "groupby"
	OpJoin         Op = "join"
	OpJQTransform  Op = "jq_transform"
	OpRegexExtract Op = "regex_extract"
	OpParseDate    Op = "parse_date"
)

// Ops lists the step kinds in the order the schema lists them.
func Ops() []Op {
	return []Op{OpHTTPRequest, OpTableSort, OpTableFilter, OpTableSelect, OpTopK, OpGroupBy, OpJoin, OpJQTransform, OpRegexExtract, OpParseDate}
}

// What http_request makes of a response (response_as).
const (
	ResponseData = "data" // read as JSON or CSV: the default
	ResponseFile = "file" // kept as a file by ref
)

// Pipeline is one execute_pipeline call.
type Pipeline struct {
	// SessionID is the model's session for context tracking; it does not
	// change what the pipeline computes and is not part of Key.
	SessionID string `json:"session_id"`
	Steps     []Step `json:"pipeline"`
	// InputRef, when set, is loaded with Env.Load and is the input of
	// step 0.
	InputRef string `json:"input_ref,omitempty"`
}

// Step is one step. Only the fields of its Op are set; Decode refuses the
// others. Empty fields take the defaults Decode writes in (Method GET,
// Order asc, How inner).
type Step struct {
	Op Op `json:"step"`

	URL    string         `json:"url,omitempty"`    // http_request
	Method string         `json:"method,omitempty"` // http_request: GET or POST
	Params map[string]any `json:"params,omitempty"` // http_request: query (GET, or POST with body_ref) or JSON body (POST)
	// ResponseAs is what http_request makes of a response: "data" (or
	// empty) reads it as JSON or CSV; "file" keeps it as a file by ref.
	ResponseAs string `json:"response_as,omitempty"`
	// BodyRef names a stored file a POST sends as its body.
	BodyRef string `json:"body_ref,omitempty"`

	Field     string     `json:"field,omitempty"`     // table_sort, groupby, regex_extract, parse_date
	Order     string     `json:"order,omitempty"`     // table_sort: asc or desc
	Condition *Condition `json:"condition,omitempty"` // table_filter
	Fields    []string   `json:"fields,omitempty"`    // table_select
	K         int        `json:"k,omitempty"`         // top_k
	By        []string   `json:"by,omitempty"`        // groupby
	Agg       string     `json:"agg,omitempty"`       // groupby: count sum avg min max

	Left  string `json:"left,omitempty"`  // join: ref of the left table; default the step's input
	Right string `json:"right,omitempty"` // join: ref of the right table
	On    string `json:"on,omitempty"`    // join
	How   string `json:"how,omitempty"`   // join: inner or left

	Query   string `json:"query,omitempty"`   // jq_transform
	Pattern string `json:"pattern,omitempty"` // regex_extract: Go (RE2) syntax
	Format  string `json:"format,omitempty"`  // parse_date: strftime directives
}

// Condition is a table_filter condition.
type Condition struct {
	Field string `json:"field"`
	Op    string `json:"op"` // = != < <= > >= in contains
	Value any    `json:"value"`
}

// Env is what Run needs from its caller. The engine does no I/O of its own.
type Env struct {
	// Fetch performs an http_request. The caller's client enforces egress
	// policy, response size and time, and may add headers (auth) to
	// req.Header. A non-2xx Response is not an error of Fetch: the engine
	// reports it. Nil makes http_request fail with a message for the model.
	// Fetch streams files both ways: a request's BodyRef is read from
	// storage as it is sent, and the body of a 2xx response to an AsFile
	// request is stored as it arrives (Response.File), never held whole.
	Fetch func(ctx context.Context, req Request) (Response, error)
	// Load reads the data a ref names (input_ref, join's left and right),
	// from the tenant's blobs; Parse turns stored bytes into a Value. Nil
	// makes refs fail with a message for the model. (A request's body_ref
	// is Fetch's to read.)
	Load func(ctx context.Context, ref string) (Value, error)
	// Limits bound every step; zero fields take their defaults.
	Limits Limits
	// JQ runs jq_transform programs, each in a child process under a
	// memory budget, a few at once (see internal/jqproc). Nil: one pool
	// for the whole process, with jqproc's defaults (256 MiB per program,
	// 4 programs at once).
	JQ *jqproc.Pool
}

// Limits bound a run. Zero fields take the defaults named on each.
type Limits struct {
	// MaxRows is the most rows any step may output. Default 100000.
	MaxRows int
	// MaxBytes is the largest JSON size of any step's output, fetched and
	// loaded inputs included. Default 16 MiB.
	MaxBytes int
	// JQTimeout bounds each jq_transform. Default 5 s.
	JQTimeout time.Duration
	// StepTimeout bounds each step but http_request, whose time is the
	// caller's Fetch's; a join's loads count. Default 10 s.
	StepTimeout time.Duration
}

// Default limits.
const (
	DefaultMaxRows     = 100_000
	DefaultMaxBytes    = 16 << 20
	DefaultJQTimeout   = 5 * time.Second
	DefaultStepTimeout = 10 * time.Second
)

// withDefaults returns l with zero fields set to their defaults.
func (l Limits) withDefaults() Limits {
	l.MaxRows = agent.OrDefault(l.MaxRows, DefaultMaxRows)
	l.MaxBytes = agent.OrDefault(l.MaxBytes, DefaultMaxBytes)
	l.JQTimeout = agent.OrDefault(l.JQTimeout, DefaultJQTimeout)
	l.StepTimeout = agent.OrDefault(l.StepTimeout, DefaultStepTimeout)
	return l
}

// Request is an http_request for Env.Fetch. URL already carries the query
// of a GET (or of a POST that sends a file); Body is the JSON body of a
// POST.
type Request struct {
	Method string
	URL    string
	Header http.Header
	Body   []byte
	// BodyRef, when set, names the stored file a POST sends as its body,
	// with the file's content type (body_ref): a ref, or previous_results[i].
	BodyRef string
	// AsFile asks that a 2xx response's body be kept as a file
	// (response_as "file").
	AsFile bool
}

// Response is what Env.Fetch got.
type Response struct {
	StatusCode  int
	ContentType string // the Content-Type header
	// Body is the response's body; for an AsFile request, only the start
	// of a body other than 2xx, for the error.
	Body []byte
	// File is the stored body of a 2xx response to an AsFile request.
	File *File
}

// File is a response kept as a file: a blob of the tenant's.
type File struct {
	Ref         string `json:"ref"` // cas://sha256:…
	ContentType string `json:"content_type"`
	Size        int64  `json:"size"`
	// Name is the file's name: the Content-Disposition's, else the last
	// segment of the URL's path; may be empty.
	Name string `json:"name,omitempty"`
}

// StepError is an error of one step. Its message starts with
// "step N (op): "; Err keeps its code (agent.CodeInvalid for what the model
// can fix).
type StepError struct {
	Index int
	Op    Op
	Err   error
}

func (e *StepError) Error() string {
	if e.Op == "" {
		return fmt.Sprintf("step %d: %v", e.Index, e.Err)
	}
	return fmt.Sprintf("step %d (%s): %v", e.Index, e.Op, e.Err)
}

func (e *StepError) Unwrap() error { return e.Err }

// invalidf returns an error the model can fix.
func invalidf(format string, args ...any) error {
	return agent.Errorf(agent.CodeInvalid, format, args...)
}

// Run executes p. It checks p as Decode does, so a Pipeline built in Go
// gets the same checks, then runs the steps in order, each on the output
// of the one before. Runs share nothing: Run may be called concurrently.
func Run(ctx context.Context, p Pipeline, env Env) (Result, error) {
	steps, err := compile(p)
	if err != nil {
		return Result{}, err
	}
	e := &engine{env: env, limits: env.Limits.withDefaults(), jq: env.JQ}
	if e.jq == nil {
		e.jq = sharedJQ()
	}
	var cur Value
	if p.InputRef != "" {
		if cur, err = e.load(ctx, p.InputRef); err != nil {
			return Result{}, fmt.Errorf("input_ref: %w", err)
		}
	}
	for _, s := range steps {
		if err := ctx.Err(); err != nil {
			return Result{}, &StepError{Index: s.index, Op: s.Op, Err: err}
		}
		next, err := e.step(ctx, s, cur)
		if err == nil {
			err = e.bound(next, grows(s.Op))
		}
		if err != nil {
			return Result{}, &StepError{Index: s.index, Op: s.Op, Err: err}
		}
		cur = next
	}
	res := newResult(cur, e.warnings)
	res.Files = e.files
	return res, nil
}

// engine runs the steps of one pipeline and gathers their warnings.
type engine struct {
	env      Env
	limits   Limits
	jq       *jqproc.Pool
	warnings []string
	files    []File // kept by http_request's response_as file
}

func (e *engine) warnf(s step, format string, args ...any) {
	e.warnings = append(e.warnings, fmt.Sprintf("step %d (%s): ", s.index, s.Op)+fmt.Sprintf(format, args...))
}

// step runs one step within Limits.StepTimeout.
func (e *engine) step(ctx context.Context, s step, in Value) (Value, error) {
	if s.Op == OpHTTPRequest {
		return e.run(ctx, s, in)
	}
	sctx, cancel := context.WithTimeout(ctx, e.limits.StepTimeout)
	defer cancel()
	v, err := e.run(sctx, s, in)
	// A jq_transform that waited its whole time for a slot did not run
	// long: its error says so.
	if err != nil && ctx.Err() == nil && sctx.Err() != nil && !errors.Is(err, jqproc.ErrBusy) {
		return Value{}, invalidf("ran past the limit of %v; give it less to do (table_filter, top_k or table_select first)", e.limits.StepTimeout)
	}
	return v, err
}

func (e *engine) run(ctx context.Context, s step, in Value) (Value, error) {
	switch s.Op {
	case OpHTTPRequest:
		return e.httpRequest(ctx, s)
	case OpJQTransform:
		return e.jqTransform(ctx, s, in)
	case OpJoin:
		return e.join(ctx, s, in)
	}
	rows, err := asTable(in)
	if err != nil {
		return Value{}, err
	}
	switch s.Op {
	case OpTableSort:
		return e.sort(ctx, s, rows)
	case OpTableFilter:
		return e.filter(ctx, s, rows)
	case OpTableSelect:
		return e.selectFields(ctx, s, rows)
	case OpTopK:
		return TableOf(slices.Clip(rows[:min(s.K, len(rows))])), nil
	case OpGroupBy:
		return e.groupBy(ctx, s, rows)
	case OpRegexExtract:
		return e.regexExtract(ctx, s, rows)
	case OpParseDate:
		return e.parseDate(ctx, s, rows)
	}
	return Value{}, fmt.Errorf("unknown step %q", s.Op)
}

// grows reports whether a step's output can be larger than its input and
// is not measured by the step itself: only those are measured here, as
// measuring walks every value. Steps that can make their output much
// larger than their input (wider rows, rows repeated by a join) measure it
// with a meter as they build it, so that they stop at MaxBytes before they
// have built it all.
func grows(op Op) bool {
	switch op {
	case OpHTTPRequest, OpParseDate, OpGroupBy:
		return true
	}
	return false
}

// bound checks a value against the row limit and, when bytes is set, the
// byte limit.
func (e *engine) bound(v Value, bytes bool) error {
	if v.Kind == KindTable && len(v.Table) > e.limits.MaxRows {
		return invalidf("output has %d rows; the limit is %d: filter or aggregate earlier, or ask the source for fewer", len(v.Table), e.limits.MaxRows)
	}
	if !bytes {
		return nil
	}
	if _, err := sizeOf(v.data(), e.limits.MaxBytes); err != nil {
		if errors.Is(err, errTooLarge) {
			return tooLarge("the output", e.limits.MaxBytes)
		}
		return err
	}
	return nil
}

// meter measures a table as a step builds it, counting as sizeOf does.
type meter struct {
	s sizer
}

func (e *engine) meter() *meter {
	return &meter{s: sizer{n: 1, limit: e.limits.MaxBytes}} // the brackets
}

// add counts one more row of the output; its error says the output is
// over MaxBytes.
func (m *meter) add(row map[string]any) error {
	m.s.n++ // the comma
	if err := m.s.walk(row, 1); err != nil {
		if errors.Is(err, errTooLarge) {
			return tooLarge("the output", m.s.limit)
		}
		return err
	}
	return nil
}

// load reads a ref with Env.Load.
func (e *engine) load(ctx context.Context, ref string) (Value, error) {
	if e.env.Load == nil {
		return Value{}, invalidf("refs cannot be read here: use http_request or pass the data another way")
	}
	v, err := e.env.Load(ctx, ref)
	if err != nil {
		return Value{}, fmt.Errorf("load %q: %w", ref, err)
	}
	if v.Kind != KindTable && v.Kind != KindDocument {
		return Value{}, fmt.Errorf("load %q: value has no kind; build it with Parse or ValueOf", ref)
	}
	if err := e.bound(v, true); err != nil {
		return Value{}, fmt.Errorf("%q: %w", ref, err)
	}
	return v, nil
}

// checkEvery is how many rows a loop handles between checks of ctx.
const checkEvery = 4096

// tick returns ctx's error every checkEvery rows.
func tick(ctx context.Context, i int) error {
	if i%checkEvery == 0 {
		return ctx.Err()
	}
	return nil
}
