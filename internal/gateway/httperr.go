package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentflow/agentflow/internal/agent"
)

// Problem is an error of the HTTP API as RFC 9457 problem details
// (application/problem+json). Every error leaves through Status first, so
// that an HTTP caller reads what a gRPC caller does: the type and HTTP
// status from agent's table, the same plain message, and for an internal
// error a reference to the log instead of its details.
type Problem struct {
	// Type is ProblemTypePrefix and the error's type (Title).
	Type string `json:"type"`
	// Title is the error's type in agent's table: AgentNotFound, Conflict, …
	Title string `json:"title"`
	// Status is the HTTP status.
	Status int `json:"status"`
	// Detail says what is wrong, in plain words.
	Detail string `json:"detail"`
	// Retryable says the same request may succeed later: a request
	// refused for a limit it may fit in shortly (RetryAfter) is.
	Retryable bool `json:"retryable"`
	// Reference ties an internal error to the gateway's log.
	Reference string `json:"reference,omitempty"`
	// RetryAfter is the wait the answer asks for before the request is
	// sent again (its Retry-After header), or 0.
	RetryAfter time.Duration `json:"-"`
}

// ProblemTypePrefix begins every Problem's type.
const ProblemTypePrefix = "urn:agentflow:error:"

// ProblemContentType is the media type of a Problem.
const ProblemContentType = "application/problem+json"

// writeError is the mux's error handler: a failed call, or a request its
// handlers could not read.
func (a *HTTPAPI) writeError(ctx context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, _ *http.Request, err error) {
	httpStatus := 0
	if hs, ok := errors.AsType[*runtime.HTTPStatusError](err); ok {
		httpStatus, err = hs.HTTPStatus, hs.Err
	}
	st := status.Convert(err)
	if _, ok := ErrorInfoOf(st); !ok {
		// Not from the service: grpc-gateway's own (a body or parameter
		// it could not read) or the in-process connection's. Its gRPC
		// code says what it is; Status decides what the caller may read.
		st = status.Convert(Status(ctx, a.logger, &agent.Error{Code: codeOfGRPC(st.Code()), Message: st.Message()}))
	}
	p := ProblemFromStatus(st)
	if httpStatus != 0 {
		p.Status = httpStatus
	}
	WriteProblem(w, p)
}

// routingError answers a request no route takes.
func (a *HTTPAPI) routingError(ctx context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, httpStatus int) {
	var err error
	switch httpStatus {
	case http.StatusNotFound:
		err = agent.Errorf(agent.CodeNotFound, "no route %s %s: the routes are listed in %s", r.Method, r.URL.Path, OpenAPIPath)
	case http.StatusMethodNotAllowed:
		err = agent.Errorf(agent.CodeInvalid, "%s does not take %s: the routes are listed in %s", r.URL.Path, r.Method, OpenAPIPath)
	default:
		err = agent.Errorf(agent.CodeInvalid, "a malformed request path")
	}
	a.Fail(w, r.WithContext(ctx), err, httpStatus)
}

// Fail answers err, with httpStatus instead of its code's when not 0,
// or the status WithHTTPStatus gave it.
func (a *HTTPAPI) Fail(w http.ResponseWriter, r *http.Request, err error, httpStatus int) {
	p := ProblemFromStatus(status.Convert(Status(r.Context(), a.logger, err)))
	if hs, ok := errors.AsType[*HTTPStatusError](err); httpStatus == 0 && ok {
		httpStatus = hs.Status
	}
	if httpStatus != 0 {
		p.Status = httpStatus
	}
	WriteProblem(w, p)
}

// ProblemFromStatus reads a status Status made.
func ProblemFromStatus(st *status.Status) Problem {
	code := codeOfGRPC(st.Code())
	ref := ""
	if info, ok := ErrorInfoOf(st); ok {
		if c, known := agent.CodeOfType(info.GetReason()); known {
			code = c
		}
		ref = info.GetMetadata()["reference"]
	}
	class := code.Class()
	wait := RetryAfterOf(st)
	return Problem{Type: ProblemTypePrefix + class.Type, Title: class.Type, Status: class.HTTP, Detail: st.Message(),
		Retryable: class.Retryable || wait > 0, Reference: ref, RetryAfter: wait}
}

// grpcCodes classifies a status that carries no type: one that did not
// come from the service. A code not here is internal.
var grpcCodes = map[codes.Code]agent.Code{
	codes.InvalidArgument:    agent.CodeInvalid,
	codes.OutOfRange:         agent.CodeInvalid,
	codes.NotFound:           agent.CodeNotFound,
	codes.Unauthenticated:    agent.CodeUnauthenticated,
	codes.PermissionDenied:   agent.CodePermissionDenied,
	codes.FailedPrecondition: agent.CodeConflict,
	codes.AlreadyExists:      agent.CodeConflict,
	codes.Aborted:            agent.CodeConflict,
	codes.ResourceExhausted:  agent.CodeRateLimited,
	codes.DeadlineExceeded:   agent.CodeTimeout,
	codes.Canceled:           agent.CodeCanceled,
	codes.Unavailable:        agent.CodeUnavailable,
}

func codeOfGRPC(c codes.Code) agent.Code {
	if code, ok := grpcCodes[c]; ok {
		return code
	}
	return agent.CodeInternal
}

// SetRetryAfter sets the Retry-After header (RFC 9110 §10.2.3, whole
// seconds, at least one) of an answer that asks its client to wait;
// none for 0.
func SetRetryAfter(h http.Header, wait time.Duration) {
	if wait > 0 {
		h.Set("Retry-After", strconv.Itoa(int(max(1, (wait+time.Second-1)/time.Second))))
	}
}

// WriteProblem answers p.
func WriteProblem(w http.ResponseWriter, p Problem) {
	h := w.Header()
	// What a handler set for an answer that is not coming.
	h.Del("Trailer")
	h.Del("Content-Length")
	h.Set("Content-Type", ProblemContentType)
	h.Set("X-Content-Type-Options", "nosniff")
	if p.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="agentflow"`)
	}
	SetRetryAfter(h, p.RetryAfter)
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}
