package mcp

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/telemetry"
)

// The tenant's files. What the tenant's turns stored (the images and
// files of a result, an uploaded file, a data turn's data) is a resource
// by its cas:// ref (readBlob), for the tenant's callers only.
//
// A result's files. The images and files a turn's answer carries are the
// tenant's blobs, named in the turn's log by their cas:// refs: a result
// names each as a resource_link (mcp_task.go). On its way to the client,
// a file small enough goes inline instead, as MCP clients show content:
// an image as image content, a sound as audio content, any other file as
// an embedded resource (text when it is text, else bytes) under its ref.
// An image's or a sound's ref stays in its _meta (mcpRefMeta). A larger
// file stays a link, read with resources/read or GET /v1/files. One rule
// for every result: a call's, a call sent again, a task's.

// Bounds of what a result carries inline.
const (
	// mcpInlineBytes bounds a file sent inline.
	mcpInlineBytes = 1 << 20
	// mcpInlineTotal bounds the files one result sends inline.
	mcpInlineTotal = 4 << 20
)

// mcpRefMeta names a file's cas:// ref in the _meta of its inline content.
const mcpRefMeta = "agentflow/ref"

// withContent sends the files of every result inline that fit (inline).
func (m *mcpServer) withContent(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		switch r := res.(type) {
		case *mcp.CallToolResult:
			m.inline(ctx, r)
		case *mcpTaskState:
			if r != nil {
				m.inline(ctx, r.Result)
			}
		}
		return res, err
	}
}

// inline replaces the links to the tenant's files in res with the files,
// as long as they fit. A file that cannot be read stays a link.
func (m *mcpServer) inline(ctx context.Context, res *mcp.CallToolResult) {
	if res == nil {
		return
	}
	budget := mcpInlineTotal
	for i, c := range res.Content {
		link, ok := c.(*mcp.ResourceLink)
		if !ok || !strings.HasPrefix(link.URI, agent.CASRefPrefix) {
			continue
		}
		info, err := m.st.TenantBlobInfo(ctx, gateway.TenantOf(ctx), link.URI)
		if err != nil || info.Size > mcpInlineBytes || info.Size > int64(budget) {
			continue
		}
		data, mimeType, err := m.st.TenantBlob(ctx, gateway.TenantOf(ctx), link.URI)
		if err != nil {
			telemetry.Logger(ctx, m.logger).Info("mcp file sent as a link: not read", zap.String("ref", link.URI), zap.Error(err))
			continue
		}
		budget -= len(data)
		res.Content[i] = inlineContent(link, data, mimeType)
	}
}

// inlineContent is the file data of type mimeType that link names, as
// content: an image, a sound, or an embedded resource.
func inlineContent(link *mcp.ResourceLink, data []byte, mimeType string) mcp.Content {
	mimeType = cmp.Or(mimeType, link.MIMEType)
	meta := mcp.Meta{mcpRefMeta: link.URI}
	base, _, _ := strings.Cut(mimeType, ";")
	switch {
	case strings.HasPrefix(base, "image/"):
		return &mcp.ImageContent{Data: data, MIMEType: mimeType, Meta: meta}
	case strings.HasPrefix(base, "audio/"):
		return &mcp.AudioContent{Data: data, MIMEType: mimeType, Meta: meta}
	}
	r := &mcp.ResourceContents{URI: link.URI, MIMEType: mimeType}
	if textual(mimeType) && utf8.Valid(data) {
		r.Text = string(data)
	} else {
		r.Blob = data
	}
	return &mcp.EmbeddedResource{Resource: r}
}

// mcpMaxResourceBytes bounds a blob resources/read answers: the answer
// holds it whole, base64-encoded.
const mcpMaxResourceBytes = 16 << 20

// mcpBlobTemplate is the URI template of a tenant's blobs.
const mcpBlobTemplate = "cas://sha256:{digest}"

// readBlob reads a blob of the caller's tenant (resources/read): text as
// text, the rest as bytes. Another tenant's ref is not found, as one that
// does not exist.
func (m *mcpServer) readBlob(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	info, err := m.st.TenantBlobInfo(ctx, gateway.TenantOf(ctx), uri)
	if err == nil && info.Size > mcpMaxResourceBytes {
		// A resource goes in one JSON-RPC answer, whole; a file that
		// large is streamed by the files route.
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(
			"%s is %d bytes, more than a resource read answers (%d): download it with GET %s/%s and the same token",
			uri, info.Size, mcpMaxResourceBytes, gateway.FilesPath, url.PathEscape(uri))}
	}
	var data []byte
	var mimeType string
	if err == nil {
		data, mimeType, err = m.st.TenantBlob(ctx, gateway.TenantOf(ctx), uri)
	}
	switch {
	case (agent.IsCode(err, agent.CodeNotFound) || agent.IsCode(err, agent.CodeInvalid)) && newProtocol(req.Session):
		// 2026-07-28 retired -32002 for invalid params.
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Resource not found: " + uri}
	case agent.IsCode(err, agent.CodeNotFound), agent.IsCode(err, agent.CodeInvalid):
		return nil, mcp.ResourceNotFoundError(uri)
	case err != nil:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: m.s.ClientMessage(ctx, err)}
	}
	c := &mcp.ResourceContents{URI: uri, MIMEType: mimeType}
	if textual(mimeType) {
		c.Text = string(data)
	} else {
		c.Blob = data
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{c}}, nil
}

// textual reports whether a blob of mimeType is read as text.
func textual(mimeType string) bool {
	base, _, _ := strings.Cut(mimeType, ";")
	switch base = strings.TrimSpace(base); {
	case strings.HasPrefix(base, "text/"), base == "application/json", base == "application/yaml", base == "application/x-ndjson":
		return true
	}
	return strings.HasSuffix(base, "+json")
}
