package openapitool

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/effects"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/openapi"
	"github.com/agentflow/agentflow/internal/telemetry"
	"github.com/agentflow/agentflow/internal/tools/kind"
	"github.com/agentflow/agentflow/internal/words"
)

// openapiTool is a built openapi_action tool.
type openapiTool struct {
	cfg      openapiConfig
	deps     kind.Deps
	docs     *documents        // the kind's cache of documents named by URL
	doc      *openapi.Document // nil until the catalog is applied (spec_url), or with openapi_url
	base     *url.URL
	allowed  egress.Policy // openapi_url.allowed_hosts
	timeout  time.Duration
	maxBytes int64
}

// arguments are the arguments the tool's calls take beside operation_id,
// params and body.
func (t *openapiTool) arguments() []string {
	var also []string
	if t.cfg.OpenAPIURL != nil {
		also = append(also, openapi.ArgOpenAPIURL)
	}
	if len(t.cfg.AuthProfiles) > 0 {
		also = append(also, openapi.ArgAuthProfile)
	}
	return also
}

func (t *openapiTool) Run(ctx context.Context, call kind.Call) (kind.Output, error) {
	args, err := openapi.DecodeArgs(call.Args, t.arguments()...)
	if err != nil {
		return kind.Output{}, err
	}
	var profile *authProfile
	if args.AuthProfile != "" {
		p, ok := t.cfg.AuthProfiles[args.AuthProfile]
		if !ok {
			return kind.Output{}, agent.Errorf(agent.CodeInvalid, "auth_profile %q: this tool's profiles are %s", words.Clip(args.AuthProfile, 80),
				strings.Join(slices.Sorted(maps.Keys(t.cfg.AuthProfiles)), ", "))
		}
		profile = &p
	}
	doc, base := t.doc, t.base
	if t.cfg.OpenAPIURL != nil {
		if doc, base, err = t.document(ctx, call, args); err != nil {
			return kind.Output{}, err
		}
	} else if doc == nil {
		return kind.Output{}, agent.Errorf(agent.CodeInvalid, "the API's document was never fetched: the catalog must be applied again")
	}
	return t.send(ctx, call, doc, base, profile, args)
}

// send makes the call args names of doc's operation, at base, with the
// entry's credentials and profile's.
func (t *openapiTool) send(ctx context.Context, call kind.Call, doc *openapi.Document, base *url.URL, profile *authProfile, args openapi.Args) (kind.Output, error) {
	c, err := doc.NewRequest(ctx, base, args)
	if err != nil {
		return kind.Output{}, err
	}
	op, req := c.Op, c.Request
	shown := op.Method + " " + shownURL(req.URL.String())
	// The egress client adds the credentials to the requests to their own
	// host only, on their way out: no request object, message or redirect
	// of ours holds them.
	creds, err := t.credentials(base, profile)
	if err != nil {
		return kind.Output{}, err
	}
	if profile != nil && !creds.Carries(req.URL) {
		return kind.Output{}, agent.Errorf(agent.CodeInvalid, "auth_profile %q is for %s, and %s is at %s: its credentials go nowhere else",
			args.AuthProfile, profile.Host, op.ID, egress.HostPort(req.URL))
	}
	if err := creds.Resolve(ctx); err != nil {
		return kind.Output{}, fmt.Errorf("auth: %w", err) // before anything is sent
	}
	if !op.Safe() && call.CallID != "" && req.Header.Get("Idempotency-Key") == "" {
		// A retried attempt sends the same key: an API that honours it
		// does not act twice on one call.
		req.Header.Set("Idempotency-Key", kind.CallKey(call.TenantID, call.JobID, call.CallID))
	}
	if op.DeclaresIdempotencyKey() {
		// The API deduplicates by the key, the same on every attempt:
		// a retry sends again (the delivery rule, delivery.go).
		ctx = effects.IdempotentHere(ctx)
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	req = req.WithContext(ctx)
	call.Progress("calling " + op.ID + ": " + shown)
	resp, err := creds.Client(call.HTTP).Do(req)
	if err != nil {
		var redirect *egress.RedirectError
		switch {
		case parent.Err() != nil:
			return kind.Output{}, parent.Err() // the call was cancelled: not the API's doing
		case errors.As(err, &redirect):
			return kind.Output{}, agent.Errorf(agent.CodeInvalid, "%s answered %s, a redirect to %s, which the tool does not follow to another host", op.ID, redirect.Status, redirect.To)
		}
		return kind.Output{}, sendError(op.ID+": "+shown, err)
	}
	defer resp.Body.Close()
	body, err := readLimited(resp.Body, t.maxBytes)
	if errors.Is(err, errTooLarge) {
		return kind.Output{}, agent.Errorf(agent.CodeInvalid, "%s: the answer is larger than %d bytes (max_response_bytes): ask for less, with a filter or a page", op.ID, t.maxBytes)
	}
	if err != nil {
		return kind.Output{}, sendError(op.ID+": "+shown, err)
	}
	status := fmt.Sprintf("%s answered %s", op.ID, resp.Status)
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode <= 399:
		// Not followed by the client: no Location, or not a redirect (304).
		return kind.Output{}, agent.Errorf(agent.CodeInvalid, "%s, which the tool cannot follow: %s", status, snippet(body))
	case retryable(resp.StatusCode):
		return kind.Output{}, agent.Errorf(agent.CodeUnavailable, "%s: %s", status, snippet(body))
	case resp.StatusCode >= 400:
		// The model reads what the API said and may call again.
		return kind.Output{}, agent.Errorf(agent.CodeInvalid, "%s: %s", status, snippet(body))
	}
	mismatch := c.CheckResponse(ctx, resp.StatusCode, resp.Header, body)
	if mismatch != "" {
		telemetry.Logger(ctx, t.deps.Logger).Warn("answer does not match the OpenAPI document",
			zap.String("operation", op.ID), zap.String("problem", mismatch))
	}
	return answer(status, resp.Header.Get("Content-Type"), body, mismatch), nil
}

// answer is what the model reads of a successful call: JSON as data,
// text as text, other media types only named.
func answer(status, contentType string, body []byte, mismatch string) kind.Output {
	var out kind.Output
	mt, _, _ := mime.ParseMediaType(contentType)
	trimmed := bytes.TrimSpace(body)
	switch {
	case len(trimmed) == 0:
		out.Text = status + "."
	case (mt == "" || mt == "application/json" || strings.HasSuffix(mt, "+json")) && json.Valid(trimmed):
		var buf bytes.Buffer
		if json.Compact(&buf, trimmed) == nil {
			trimmed = buf.Bytes()
		}
		out.Text, out.Data, out.ShowData = status+": "+jsonShape(trimmed)+".", trimmed, true
	case mt == "" || strings.HasPrefix(mt, "text/") || strings.HasSuffix(mt, "+xml") || mt == "application/xml":
		out.Text = status + " (" + cmp.Or(mt, "text") + "):\n" + string(body)
	default:
		out.Text = fmt.Sprintf("%s with %d bytes of %s, which the tool does not pass on.", status, len(body), mt)
	}
	if mismatch != "" {
		out.Text += "\nNote: the answer does not match the API's document: " + mismatch
	}
	return out
}

// jsonShape says what a JSON document is: "a list of 3 items".
func jsonShape(data []byte) string {
	switch data[0] {
	case '[':
		var items []json.RawMessage
		if json.Unmarshal(data, &items) == nil {
			return words.Count(len(items), "item") + " in a list"
		}
	case '{':
		var fields map[string]json.RawMessage
		if json.Unmarshal(data, &fields) == nil {
			return "an object of " + words.Count(len(fields), "field")
		}
	}
	return "a JSON value"
}

// sendError classifies an error of sending a request or reading its
// answer: a refusal of the egress policy is the catalog's (or the
// model's) to fix; a timeout or a failed connection may pass.
func sendError(what string, err error) error {
	var held *effects.MaybeSentError
	if errors.As(err, &held) {
		return held // the runtime reports it as the call's unknown outcome
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its message repeats the URL, query and all
	}
	var ae *agent.Error
	if errors.As(err, &ae) {
		return &agent.Error{Code: ae.Code, Message: what + ": " + ae.Message}
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return agent.Errorf(agent.CodeUnavailable, "%s: no answer in time", what)
	}
	return agent.Errorf(agent.CodeUnavailable, "%s: %v", what, err)
}

// retryable reports whether a status says to try again later.
func retryable(status int) bool {
	return status >= 500 || status == http.StatusRequestTimeout || status == http.StatusTooManyRequests
}

var errTooLarge = errors.New("too large")

// readLimited reads at most limit bytes; more is errTooLarge.
func readLimited(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, errTooLarge
	}
	return data, nil
}

// shownURL is a URL for messages: no user info, no query (where keys go).
func shownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(a URL that cannot be read)"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment = nil, "", false, ""
	return u.String()
}

// snippet is the start of an answer, for a message.
func snippet(body []byte) string {
	s := strings.Join(strings.Fields(string(body)), " ")
	if s == "" {
		return "(no body)"
	}
	return words.Clip(s, 1000)
}
