package program

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/agentflow/agentflow/internal/words"
	"github.com/dop251/goja"
)

// fault classifies an error the interpreter returned.
func (it *interp) fault(err error) error {
	if ie, ok := errors.AsType[*goja.InterruptedError](err); ok {
		if s, ok := ie.Value().(*stop); ok {
			return s.err
		}
	}
	if it.stopped != nil {
		return it.stopped
	}
	if _, ok := errors.AsType[*goja.StackOverflowError](err); ok {
		return &Error{Kind: KindRuntime, Message: fmt.Sprintf("RangeError: maximum call stack size (%d) exceeded", maxStack)}
	}
	if ex, ok := errors.AsType[*goja.Exception](err); ok {
		return it.thrown(ex.Value())
	}
	return fmt.Errorf("run the program: %w", err)
}

// stackPos finds the first position in the program in a stack trace.
var stackPos = regexp.MustCompile(regexp.QuoteMeta(filename) + `:(\d+):(\d+)`)

// thrown is the runtime Error of a value the program threw or rejected
// its body with: its message, and where it was made when it is an Error.
func (it *interp) thrown(v goja.Value) (e *Error) {
	e = &Error{Kind: KindRuntime}
	// Reading a thrown object runs the program's code (a toString, a
	// getter of stack), which can throw in turn.
	defer func() {
		if recover() != nil {
			e = &Error{Kind: KindRuntime, Message: "the program threw a value that cannot be shown"}
		}
	}()
	if v == nil {
		e.Message = "the program threw nothing"
		return e
	}
	e.Message = words.Clip(v.String(), maxMessage)
	if o, ok := v.(*goja.Object); ok {
		if st := o.Get("stack"); st != nil && !goja.IsUndefined(st) {
			if m := stackPos.FindStringSubmatch(st.String()); m != nil {
				line, _ := strconv.Atoi(m[1])
				col, _ := strconv.Atoi(m[2])
				if line > 1 {
					e.Line, e.Column = line-1, col
				}
			}
		}
	}
	return e
}

// parserPos is the position the parser puts before its message.
var parserPos = regexp.MustCompile(`^` + regexp.QuoteMeta(filename) + `: Line (\d+):(\d+) `)

// syntaxError is a compile error, positioned in the user's source.
func syntaxError(err error) *Error {
	e := &Error{Kind: KindSyntax, Message: words.Clip(err.Error(), maxMessage)}
	var se *goja.CompilerSyntaxError
	var re *goja.CompilerReferenceError
	var ce *goja.CompilerError
	switch {
	case errors.As(err, &se):
		ce = &se.CompilerError
	case errors.As(err, &re):
		ce = &re.CompilerError
	default:
		return e
	}
	// The parser's message starts with its own position, in the
	// wrapped source; Line and Column say it in the user's.
	msg := ce.Message
	if m := parserPos.FindStringSubmatch(msg); m != nil {
		msg = msg[len(m[0]):]
		line, _ := strconv.Atoi(m[1])
		col, _ := strconv.Atoi(m[2])
		if line > 1 {
			e.Line, e.Column = line-1, col
		}
	}
	e.Message = "SyntaxError: " + words.Clip(msg, maxMessage)
	if ce.File != nil && e.Line == 0 {
		p := ce.File.Position(ce.Offset)
		if p.Line > 1 {
			e.Line, e.Column = p.Line-1, p.Column
		}
	}
	return e
}

// limitError names a limit and its value, for the model.
func limitError(limit string, l Limits) *Error {
	var msg string
	switch limit {
	case LimitTime:
		msg = fmt.Sprintf("limit: time (%v): the program computed for longer than it may between tool calls; look for a loop that does not end", l.Time)
	case LimitCalls:
		msg = fmt.Sprintf("limit: calls (%d): the program may make at most %d tool calls", l.Calls, l.Calls)
	case LimitOutput:
		msg = fmt.Sprintf("limit: output (%s): the console output and the return value together may be at most %s; print less, return a summary", size(int64(l.Output)), size(int64(l.Output)))
	default:
		msg = "limit: " + limit
	}
	return &Error{Kind: KindLimit, Limit: limit, Message: msg}
}

// size writes a byte count in the unit that makes it short.
func size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
