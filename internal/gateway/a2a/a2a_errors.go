package a2a

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"google.golang.org/grpc/status"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
)

// How the door says agentflow's errors, in both versions. A2A gives a
// JSON-RPC code to what is its own (a task not found, not cancelable, an
// operation not supported) and leaves the rest to the binding; the door
// says each class of agentflow's table (gateway.ErrorClasses) one way
// (a2aClasses):
//
//   - a request the door cannot serve as it is: InvalidParams (-32602);
//   - a task that does not exist, or is another tenant's: TaskNotFound
//     (-32001);
//   - what contradicts the task's state (a message for a task that has
//     ended): UnsupportedOperation (-32004), as 1.0 says;
//   - no credential, or one without the role: HTTP 401 or 403, with
//     -32000 (the JSON-RPC range left to implementations; A2A reserves
//     -32001 to -32099);
//   - a limit (the tenant's open streams, bodies in flight, a session's
//     waiting messages): HTTP 429 with Retry-After, and -32000, so that
//     a client tells a limit from a bug and waits before it tries again;
//   - a dependency down, or a bug: InternalError (-32603), with a
//     reference to the gateway's log.
//
// Every error the door classifies also carries agentflow's own say: 1.0's
// error data has a google.rpc.ErrorInfo of domain agentflow.v1 whose
// reason is the error's type in agent's table (RateLimited, Unavailable,
// …; its metadata the reference of an internal error), and for a limit a
// google.rpc.RetryInfo with the wait; 0.3's error data (an object, as
// a2a-go's clients read it) has "reason", "domain" and "retryDelay"
// beside a2a-go's "error". 0.3's methods are answered by a2a-go's
// handler, which answers every error of a method with HTTP 200: a limit
// met there (a session's waiting messages) is 200 and -32000; the
// tenant's open streams are counted before the handler (a2aVersions).

// a2aClass is how the door says one class: the A2A kind of the error
// (its JSON-RPC code, a2aV1Codes) and the HTTP status of the answer.
type a2aClass struct {
	kind   error
	status int
}

// a2aClasses are the door's classes (see above).
var a2aClasses = map[agent.Code]a2aClass{
	agent.CodeInvalid:          {a2a.ErrInvalidParams, http.StatusOK},
	agent.CodeUnauthenticated:  {a2a.ErrServerError, http.StatusUnauthorized},
	agent.CodePermissionDenied: {a2a.ErrServerError, http.StatusForbidden},
	agent.CodeNotFound:         {a2a.ErrTaskNotFound, http.StatusOK},
	agent.CodeConflict:         {a2a.ErrUnsupportedOperation, http.StatusOK},
	agent.CodeRateLimited:      {a2a.ErrServerError, http.StatusTooManyRequests},
	agent.CodeUnavailable:      {a2a.ErrInternalError, http.StatusOK},
	agent.CodeInternal:         {a2a.ErrInternalError, http.StatusOK},
}

// Errors is the door's row of the gateway's error table: the HTTP status
// and JSON-RPC code of each class, the same in 0.3 and 1.0.
var Errors = gateway.NewDoorErrors("A2A 0.3 and 1.0 (JSON-RPC)", agent.ChannelA2A, func(class agent.Code) gateway.DoorError {
	c := a2aClasses[class]
	return gateway.DoorError{HTTP: c.status, Code: strconv.Itoa(a2aErrorCode(c.kind))}
})

// a2aError is an error the door classified by agent's table: its A2A
// kind, what a client may read of it, and agentflow's say of it.
type a2aError struct {
	kind error
	msg  string
	// typ is the error's type in agent's table (RateLimited, …).
	typ string
	// status is the HTTP status of an answer the door writes itself (a
	// 1.0 answer, or one refused before its call is read).
	status int
	// ref ties an internal error to the gateway's log.
	ref string
	// retryAfter is the wait a limit asks for.
	retryAfter time.Duration
}

func (e *a2aError) Error() string {
	if strings.HasPrefix(e.msg, e.label()) {
		return e.msg // "internal error (reference …)"
	}
	return e.msg + ": " + e.label()
}
func (e *a2aError) Unwrap() error { return e.kind }

// label is the error's short name: its A2A kind's, or for agentflow's
// own (ErrServerError) its type in agent's table.
func (e *a2aError) label() string {
	if e.kind == a2a.ErrServerError && e.typ != "" {
		return e.typ
	}
	return e.kind.Error()
}

// a2aProblem is the door's error of p, a problem the gateway made of an
// error: the class's kind, or notFound for a NotFound (the thing that is
// not found is not always a task).
func a2aProblem(p gateway.Problem, notFound error) *a2aError {
	code, _ := agent.CodeOfType(p.Title)
	class := gateway.ClassOf(code)
	c := a2aClasses[class]
	if class == agent.CodeNotFound && notFound != nil {
		c.kind = notFound
	}
	if p.Status == http.StatusRequestEntityTooLarge || p.Status == http.StatusRequestTimeout {
		c.status = p.Status // a body refused as it arrived: HTTP's own say
	}
	return &a2aError{kind: c.kind, msg: p.Detail, typ: p.Title, status: c.status, ref: p.Reference, retryAfter: p.RetryAfter}
}

// classify is err, an error of the gateway's (a status its methods made,
// or any other error, which Status classifies), as the door's error.
func (m *a2aServer) classify(ctx context.Context, err error, notFound error) *a2aError {
	st, ok := status.FromError(err)
	if _, typed := gateway.ErrorInfoOf(st); !ok || !typed {
		st = status.Convert(m.s.StatusOf(ctx, err))
	}
	p := gateway.ProblemFromStatus(st)
	if hs, ok := errors.AsType[*gateway.HTTPStatusError](err); ok {
		p.Status = hs.Status
	}
	return a2aProblem(p, notFound)
}

// a2aRefusal is an error the door finds itself, of class code:
// a2aClasses' kind and status for it.
func a2aRefusal(code agent.Code, format string, args ...any) *a2aError {
	return a2aProblem(gateway.Problem{Title: code.Class().Type, Detail: fmt.Sprintf(format, args...)}, nil)
}

// a2aStatus is the HTTP status of a 1.0 answer with err: its class's,
// for an error the door classified; 200 for the rest, as JSON-RPC
// answers are.
func a2aStatus(err error) int {
	if e, ok := errors.AsType[*a2aError](err); ok && e.status != 0 {
		return e.status
	}
	return http.StatusOK
}

// a2aV1Data is 1.0's error data for err: A2A's ErrorInfo (reason, when
// the kind has one), then agentflow's (the error's type, and an internal
// error's reference) and a limit's RetryInfo.
func a2aV1Data(err error, reason string) []map[string]any {
	var data []map[string]any
	if reason != "" {
		data = append(data, map[string]any{"@type": errorInfoType, "reason": reason, "domain": "a2a-protocol.org"})
	}
	var e *a2aError
	if !errors.As(err, &e) || e.typ == "" {
		return data
	}
	info := map[string]any{"@type": errorInfoType, "reason": e.typ, "domain": gateway.ErrorDomain}
	if e.ref != "" {
		info["metadata"] = map[string]string{"reference": e.ref}
	}
	data = append(data, info)
	if e.retryAfter > 0 {
		data = append(data, map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": protoDuration(e.retryAfter)})
	}
	return data
}

// errorInfoType is the @type of a google.rpc.ErrorInfo in ProtoJSON.
const errorInfoType = "type.googleapis.com/google.rpc.ErrorInfo"

// protoDuration is d in ProtoJSON ("1s", "1.500s").
func protoDuration(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

// a2aV03Data is 0.3's error data for err, an object as a2a-go writes
// and reads it: "error", the message, and agentflow's say of it.
func a2aV03Data(err error) map[string]any {
	var e *a2aError
	if !errors.As(err, &e) {
		return map[string]any{"error": err.Error()}
	}
	data := map[string]any{"error": e.msg}
	if e.typ != "" {
		data["reason"], data["domain"] = e.typ, gateway.ErrorDomain
	}
	if e.ref != "" {
		data["reference"] = e.ref
	}
	if e.retryAfter > 0 {
		data["retryDelay"] = protoDuration(e.retryAfter)
	}
	return data
}
