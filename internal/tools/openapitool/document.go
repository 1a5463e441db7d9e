package openapitool

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/openapi"
)

// loadOpenAPI narrows a document to the operations the config grants (by
// operations and methods) and what they use, loads that, and finds its
// base URL.
func loadOpenAPI(ctx context.Context, cfg openapiConfig, src *openapi.Source, from *url.URL) (*openapi.Document, *url.URL, error) {
	ids := cfg.Operations
	if len(cfg.Methods) > 0 {
		outline, err := src.Outline()
		if err != nil {
			return nil, nil, err
		}
		if ids, err = grantedByMethod(cfg, outline); err != nil {
			return nil, nil, err
		}
	}
	doc, err := openapi.LoadOperations(ctx, src, ids)
	if err != nil {
		return nil, nil, err
	}
	if len(doc.Operations()) == 0 {
		return nil, nil, agent.Errorf(agent.CodeInvalid, "the document has no operations")
	}
	base, err := doc.BaseURL(cfg.Server, from)
	if err != nil {
		return nil, nil, err
	}
	return doc, base, nil
}

// grantedByMethod returns the ids of the operations the config grants,
// methods included: those operations names, each of a method methods
// allows, or without operations every operation of those methods.
func grantedByMethod(cfg openapiConfig, outline []openapi.OperationInfo) ([]string, error) {
	byID := map[string]openapi.OperationInfo{}
	var ids []string
	for _, op := range outline {
		byID[op.ID] = op
		if slices.Contains(cfg.Methods, op.Method) {
			ids = append(ids, op.ID)
		}
	}
	if len(cfg.Operations) == 0 {
		if len(ids) == 0 {
			return nil, agent.Errorf(agent.CodeInvalid, "methods: the document has no %s operation", strings.Join(cfg.Methods, " or "))
		}
		return ids, nil
	}
	for _, id := range cfg.Operations {
		if op, ok := byID[id]; ok && !slices.Contains(cfg.Methods, op.Method) {
			return nil, agent.Errorf(agent.CodeInvalid, "operations: %q is %s %s, and methods allows %s", id, op.Method, op.Path, strings.Join(cfg.Methods, ", "))
		}
	}
	return cfg.Operations, nil // one the document lacks is named when it is narrowed
}

// pinnedSpec is the config's document: inline, or pinned compressed.
func pinnedSpec(cfg openapiConfig) ([]byte, error) {
	if len(cfg.SpecGzip) == 0 {
		return normalizeSpec(cfg.Spec), nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(cfg.SpecGzip))
	if err != nil {
		return nil, fmt.Errorf("spec_gzip: %w", err)
	}
	data, err := readLimited(zr, maxUnzippedSpec)
	if err != nil {
		return nil, fmt.Errorf("spec_gzip: %w", err)
	}
	return data, nil
}

// gzipped is data compressed.
func gzipped(data []byte) []byte {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	_, _ = zw.Write(data) // into memory: no error
	_ = zw.Close()
	return b.Bytes()
}

// normalizeSpec reads `openapi: 3.1` of an inline YAML document, which
// YAML makes a number, as the string it stands for.
func normalizeSpec(spec json.RawMessage) json.RawMessage {
	var top map[string]json.RawMessage
	if json.Unmarshal(spec, &top) != nil {
		return spec
	}
	v, ok := top["openapi"]
	if !ok || len(v) == 0 || v[0] == '"' {
		return spec
	}
	var n json.Number
	if json.Unmarshal(v, &n) != nil {
		return spec
	}
	version := n.String()
	if !strings.Contains(version, ".") {
		version += ".0" // `openapi: 3.0` reads as 3
	}
	top["openapi"], _ = json.Marshal(version)
	out, err := json.Marshal(top)
	if err != nil {
		return spec
	}
	return out
}

// fetchDocument reads an API's document from raw through client (the
// tenant's egress), at most limit bytes of it; what names it in errors.
// The document is streamed into an openapi.Source, never held whole.
func fetchDocument(ctx context.Context, client *http.Client, raw string, limit int64, what string) (*openapi.Source, error) {
	if client == nil {
		return nil, agent.Errorf(agent.CodeInvalid, "%s: no egress is configured", what)
	}
	ctx, cancel := context.WithTimeout(ctx, defaultOpenAPITimeout)
	defer cancel()
	// The egress policy's cap on answers bounds what a call holds; a
	// document is narrowed as it is read, and bounded by the operator's
	// limit for documents instead.
	req, err := http.NewRequestWithContext(egress.Streamed(ctx, limit), http.MethodGet, raw, nil)
	if err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "%s: %v", what, err)
	}
	req.Header.Set("Accept", "application/json, application/yaml;q=0.9, */*;q=0.5")
	resp, err := client.Do(req)
	if err != nil {
		return nil, documentError(what, limit, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		code := agent.CodeInvalid
		if retryable(resp.StatusCode) {
			code = agent.CodeUnavailable
		}
		return nil, agent.Errorf(code, "%s answered %s", what, resp.Status)
	}
	src, err := openapi.Read(resp.Body, limit)
	if err != nil {
		return nil, documentError(what, limit, err)
	}
	return src, nil
}

// documentError says what went wrong fetching a document: too large for
// the operator's limit, not a document, or not fetched.
func documentError(what string, limit int64, err error) error {
	var big *openapi.TooLargeError
	var bigAnswer *egress.TooLargeError
	switch {
	case errors.As(err, &big) && big.YAML:
		return agent.Errorf(agent.CodeInvalid, "%s: %v, twice the operator's limit (%s)", what, big, EnvMaxSpecBytes)
	case errors.As(err, &big), errors.As(err, &bigAnswer):
		return agent.Errorf(agent.CodeInvalid, "%s: the document is larger than %d bytes, the operator's limit (%s)", what, limit, EnvMaxSpecBytes)
	case agent.IsCode(err, agent.CodeInvalid) && !isTransport(err):
		return agent.WithCode(agent.CodeInvalid, fmt.Errorf("%s: %w", what, err))
	}
	return sendError(what, err)
}

// isTransport reports whether err came from sending a request (the
// egress policy's refusals among them) rather than from reading a document.
func isTransport(err error) bool {
	var ue *url.Error
	return errors.As(err, &ue)
}
