package gateway

import (
	"cmp"
	"fmt"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/agentflow/agentflow/internal/agent"
)

// How each door says an error. Every error of a request is classified
// once, by agent's table (Status); a door then says it in its protocol's
// own terms. The classes a client must tell apart are few (ErrorClasses):
// a request it must change (invalid), a credential it must fix
// (unauthenticated, permission denied), a thing that is not there (not
// found), a state it contradicts (conflict), a limit it must wait for
// (limit), a dependency that failed (unavailable) and a bug (internal).
//
// Each door has a row (DoorErrors) that says how it answers each class:
// the HTTP status of its answer and its protocol's code. A door renders
// from its row where its protocol leaves the choice to it; the doors
// package gathers the rows (doors.ErrorTable), docs/reference/errors.md
// shows them (a test checks the page against them), and the e2e suite
// provokes every class at every door and checks the answer against the
// row.

// ErrorClasses are the classes every door tells apart, in the table's
// order: each is the code of agent's table that stands for the codes
// ClassOf maps onto it.
func ErrorClasses() []agent.Code {
	return []agent.Code{agent.CodeInvalid, agent.CodeUnauthenticated, agent.CodePermissionDenied, agent.CodeNotFound,
		agent.CodeConflict, agent.CodeRateLimited, agent.CodeUnavailable, agent.CodeInternal}
}

// ClassOf is the class of code, read from its HTTP status in agent's
// table: 400 and 422 are invalid (the request cannot be served as it
// is), 409 a conflict, 429 a limit, 502 to 504 unavailable (a retry may
// succeed), any other 5xx internal.
func ClassOf(code agent.Code) agent.Code {
	return cmp.Or(classOfStatus[code.Class().HTTP], agent.CodeInternal)
}

// classOfStatus is the class of each HTTP status that has one (ClassOf).
var classOfStatus = map[int]agent.Code{
	http.StatusBadRequest: agent.CodeInvalid, http.StatusUnprocessableEntity: agent.CodeInvalid,
	http.StatusUnauthorized:    agent.CodeUnauthenticated,
	http.StatusForbidden:       agent.CodePermissionDenied,
	http.StatusNotFound:        agent.CodeNotFound,
	http.StatusConflict:        agent.CodeConflict,
	http.StatusTooManyRequests: agent.CodeRateLimited,
	http.StatusBadGateway:      agent.CodeUnavailable, http.StatusServiceUnavailable: agent.CodeUnavailable, http.StatusGatewayTimeout: agent.CodeUnavailable,
}

// ClassName is how the docs name a class.
func ClassName(class agent.Code) string {
	return cmp.Or(classNames[class], string(class))
}

// classNames are the names of the classes the docs do not call by their code.
var classNames = map[agent.Code]string{
	agent.CodePermissionDenied: "permission denied",
	agent.CodeNotFound:         "not found",
	agent.CodeRateLimited:      "limit",
}

// LimitRetryAfter is the least wait a door asks of a client refused for
// a limit it may fit in shortly (RateLimited: the tenant's open streams,
// bodies in flight, a session's waiting messages): the gateway cannot
// know when a slot frees, and a client that waits this long before it
// tries again does not hammer it. Status carries it as a RetryInfo; the
// doors say it in their terms (Retry-After, RetryInfo, _meta).
const LimitRetryAfter = time.Second

// A DoorError is how a door answers one class of error: the HTTP status
// of its answer (0 for gRPC, which has none) and its protocol's code (a
// gRPC status code, a JSON-RPC error code, OpenAI's error type, …; none
// when the status says it all).
type DoorError struct {
	HTTP int
	Code string
}

// String is the error as the docs' table shows it: "—" for a class the
// door never meets.
func (e DoorError) String() string {
	if e == (DoorError{}) {
		return "—"
	}
	var parts []string
	if e.HTTP != 0 {
		parts = append(parts, fmt.Sprint(e.HTTP))
	}
	if e.Code != "" {
		parts = append(parts, "`"+e.Code+"`")
	}
	return strings.Join(parts, " ")
}

// DoorErrors is one door's row: how it answers each class.
type DoorErrors struct {
	// Door names the door (and its protocol's versions) as the docs do.
	Door string
	// Channel is the door's agent.Channels entry; "" for the API's own
	// (gRPC, the HTTP API).
	Channel string
	// Errors has an entry for each of ErrorClasses; a zero one for a
	// class the door never meets.
	Errors map[agent.Code]DoorError
}

// NewDoorErrors is the row of a door whose answer to each class is
// of(class): the function the door renders its errors with, so that the
// row and the answers are one.
func NewDoorErrors(door, channel string, of func(class agent.Code) DoorError) DoorErrors {
	row := DoorErrors{Door: door, Channel: channel, Errors: map[agent.Code]DoorError{}}
	for _, c := range ErrorClasses() {
		row.Errors[c] = of(c)
	}
	return row
}

// GRPCErrors is the gRPC API's row: the status codes of agent's table
// (the status carries the error's type as an ErrorInfo, and a limit's
// wait as a RetryInfo).
func GRPCErrors() DoorErrors {
	return NewDoorErrors("gRPC (`AgentService`, `CatalogService`)", "", func(c agent.Code) DoorError {
		return DoorError{Code: codes.Code(c.Class().GRPC).String()}
	})
}

// ProblemErrors is the row of a door that refuses a request as the HTTP
// API does: problem details (WriteProblem) with the status of agent's
// table.
func ProblemErrors(door, channel string) DoorErrors {
	return NewDoorErrors(door, channel, func(c agent.Code) DoorError { return DoorError{HTTP: c.Class().HTTP} })
}

// HTTPErrors is the HTTP API's own row (its JSON routes).
func HTTPErrors() DoorErrors {
	return ProblemErrors("HTTP API (JSON routes; the chat page shows their problems)", "")
}

// ErrorTableMarkdown is rows as the docs' table: a door a line, a class
// a column.
func ErrorTableMarkdown(rows []DoorErrors) string {
	var b strings.Builder
	b.WriteString("| door |")
	for _, c := range ErrorClasses() {
		b.WriteString(" " + ClassName(c) + " |")
	}
	b.WriteString("\n| --- |" + strings.Repeat(" --- |", len(ErrorClasses())) + "\n")
	for _, r := range rows {
		b.WriteString("| " + r.Door + " |")
		for _, c := range ErrorClasses() {
			b.WriteString(" " + r.Errors[c].String() + " |")
		}
		b.WriteString("\n")
	}
	return b.String()
}
