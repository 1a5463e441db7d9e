package openapi

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/words"
)

// Args are a call's arguments: {"operation_id", "params", "body"}, and
// for a tool whose calls choose the API and the credentials, the
// document's URL and the credentials' name ({"openapi_url",
// "auth_profile"}).
type Args struct {
	OperationID string
	OpenAPIURL  string
	AuthProfile string
	// Params maps parameter keys (Operation.Keys) to JSON values, numbers
	// as json.Number.
	Params map[string]any
	// Body is the request body; HasBody says it was given (even as null).
	Body    any
	HasBody bool
}

// Arguments a call may give besides operation_id, params and body, when
// its tool takes them (DecodeArgs).
const (
	ArgOpenAPIURL  = "openapi_url"
	ArgAuthProfile = "auth_profile"
)

// DecodeArgs reads a call's arguments, a JSON object; also names the
// arguments it takes beside operation_id, params and body (ArgOpenAPIURL,
// ArgAuthProfile). Errors are agent.CodeInvalid, for the model. A key
// given twice counts once, with its last value, as approval policies read
// the arguments.
func DecodeArgs(raw []byte, also ...string) (Args, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return Args{}, agent.Errorf(agent.CodeInvalid, `the arguments must be a JSON object: {"operation_id": "...", "params": {...}, "body": ...}`)
	}
	var a Args
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		v := fields[k]
		switch k {
		case "operation_id":
			if err := json.Unmarshal(v, &a.OperationID); err != nil {
				return Args{}, agent.Errorf(agent.CodeInvalid, "operation_id must be a string")
			}
		case ArgOpenAPIURL, ArgAuthProfile:
			if !slices.Contains(also, k) {
				return Args{}, errUnknownArg(k, also)
			}
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return Args{}, agent.Errorf(agent.CodeInvalid, "%s must be a string", k)
			}
			if k == ArgOpenAPIURL {
				a.OpenAPIURL = s
			} else {
				a.AuthProfile = s
			}
		case "params":
			// Numbers stay json.Number, so that they reach the API as
			// written.
			p, err := agent.UnmarshalNumbers(v)
			if err != nil {
				return Args{}, agent.Errorf(agent.CodeInvalid, "params: %v", err)
			}
			switch p := p.(type) {
			case nil:
			case map[string]any:
				a.Params = p
			default:
				return Args{}, agent.Errorf(agent.CodeInvalid, "params must be an object of parameter values by name, not %s", kindOf(p))
			}
		case "body":
			b, err := agent.UnmarshalNumbers(v)
			if err != nil {
				return Args{}, agent.Errorf(agent.CodeInvalid, "body: %v", err)
			}
			a.Body, a.HasBody = b, true
		default:
			return Args{}, errUnknownArg(k, also)
		}
	}
	return a, nil
}

func errUnknownArg(k string, also []string) error {
	names := append([]string{"operation_id", "params", "body"}, also...)
	list := strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
	return agent.Errorf(agent.CodeInvalid, "unknown argument %q: the arguments are %s", words.Clip(k, 40), list)
}
