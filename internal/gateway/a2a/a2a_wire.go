package a2a

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentflow/agentflow/internal/gateway"
)

// The door's JSON-RPC answers and errors, for both versions: one table
// of error codes, and the writers of 1.0's answers and of the errors
// either version answers before its call is read.

// writeA2AError answers a 0.3 request refused before its JSON-RPC call
// is read (or a card's request): a JSON-RPC error without an id.
func writeA2AError(w http.ResponseWriter, status int, err error) {
	code, _, _ := a2aCodeOf(err)
	msg := a2a.ErrInternalError.Error()
	if e, ok := errors.AsType[*a2aError](err); ok {
		msg = e.label()
	} else if i := slices.IndexFunc(a2aV1Codes, func(c a2aV1Code) bool { return errors.Is(err, c.kind) }); i >= 0 {
		msg = a2aV1Codes[i].kind.Error()
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{
		"code": code, "message": msg, "data": a2aV03Data(err)}})
	writeA2AAnswer(w, status, err, body)
}

// writeA2AAnswer writes an error's answer: its status, and the headers
// its class asks for (the wait of a limit, the scheme of a credential).
func writeA2AAnswer(w http.ResponseWriter, status int, err error, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e, ok := errors.AsType[*a2aError](err); ok {
		gateway.SetRetryAfter(h, e.retryAfter)
	}
	if status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="agentflow"`)
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// a2aV1Code is an A2A error kind's JSON-RPC code and ErrorInfo reason.
type a2aV1Code struct {
	kind   error
	code   int
	reason string
}

// a2aV1Codes are the JSON-RPC codes and ErrorInfo reasons of A2A 1.0's
// errors (specification §5.4 and §9.5); 0.3's codes are the same
// (a2aErrorCode). ErrServerError is agentflow's own (a2a_errors.go):
// -32000, the code JSON-RPC leaves to implementations and A2A does not
// reserve, with no reason of A2A's.
var a2aV1Codes = []a2aV1Code{
	{a2a.ErrParseError, -32700, "PARSE_ERROR"},
	{a2a.ErrInvalidRequest, -32600, "INVALID_REQUEST"},
	{a2a.ErrMethodNotFound, -32601, "METHOD_NOT_FOUND"},
	{a2a.ErrInvalidParams, -32602, "INVALID_PARAMS"},
	{a2a.ErrInternalError, -32603, "INTERNAL_ERROR"},
	{a2a.ErrServerError, -32000, ""},
	{a2a.ErrTaskNotFound, -32001, "TASK_NOT_FOUND"},
	{a2a.ErrTaskNotCancelable, -32002, "TASK_NOT_CANCELABLE"},
	{a2a.ErrPushNotificationNotSupported, -32003, "PUSH_NOTIFICATION_NOT_SUPPORTED"},
	{a2a.ErrUnsupportedOperation, -32004, "UNSUPPORTED_OPERATION"},
	{a2a.ErrUnsupportedContentType, -32005, "CONTENT_TYPE_NOT_SUPPORTED"},
	{a2a.ErrInvalidAgentResponse, -32006, "INVALID_AGENT_RESPONSE"},
	{errA2AExtendedCardNotConfigured, -32007, "EXTENDED_AGENT_CARD_NOT_CONFIGURED"},
	{errA2AVersionNotSupported, -32009, "VERSION_NOT_SUPPORTED"},
}

// a2aV1ErrorOf is err as 1.0's JSON-RPC error object. The door's errors
// carry the message a client may see; one of no known kind is internal.
func a2aV1ErrorOf(err error) map[string]any {
	code, reason, known := a2aCodeOf(err)
	msg := "internal error"
	if known {
		msg = err.Error()
	}
	e := map[string]any{"code": code, "message": msg}
	if data := a2aV1Data(err, reason); len(data) > 0 {
		e["data"] = data
	}
	return e
}

// a2aCodeOf is the JSON-RPC code and reason of err's kind, and whether
// it has one of a2aV1Codes' kinds: one of none is internal.
func a2aCodeOf(err error) (int, string, bool) {
	for _, c := range a2aV1Codes {
		if errors.Is(err, c.kind) {
			return c.code, c.reason, true
		}
	}
	return -32603, "INTERNAL_ERROR", false
}

// a2aErrorCode is the JSON-RPC code of an error kind, the same in 0.3
// (a2a-go v0.3's table) and 1.0.
func a2aErrorCode(kind error) int {
	code, _, _ := a2aCodeOf(kind)
	return code
}

func a2aV1ID(id json.RawMessage) json.RawMessage {
	if len(id) == 0 {
		return json.RawMessage("null")
	}
	return id
}

// writeA2AV1Error answers a 1.0 request with an error: HTTP 200, as
// JSON-RPC answers are, unless the error's class says otherwise
// (a2aClasses: a credential refused, a limit).
func writeA2AV1Error(w http.ResponseWriter, id json.RawMessage, err error) {
	writeA2AV1ErrorStatus(w, a2aStatus(err), id, err)
}

func writeA2AV1ErrorStatus(w http.ResponseWriter, status int, id json.RawMessage, err error) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": a2aV1ID(id), "error": a2aV1ErrorOf(err)})
	writeA2AAnswer(w, status, err, body)
}

// writeA2AErrorFor answers a request refused before its call is read (no
// token, a body too large, no stream left) in the shape of the version
// it names.
func writeA2AErrorFor(w http.ResponseWriter, r *http.Request, err *a2aError) {
	if v, _ := a2aRequestVersion(r); v == A2AV1ProtocolVersion {
		writeA2AV1ErrorStatus(w, err.status, nil, err)
		return
	}
	writeA2AError(w, err.status, err)
}

func writeA2AV1Result(w http.ResponseWriter, id json.RawMessage, result any) {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": a2aV1ID(id), "result": result})
	if err != nil {
		writeA2AV1Error(w, id, fmt.Errorf("the answer could not be written: %w", a2a.ErrInternalError))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}
