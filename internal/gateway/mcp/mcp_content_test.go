package mcp

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// TestInlineContent: a file sent inline is content of its kind, and names
// its ref.
func TestInlineContent(t *testing.T) {
	const ref = "cas://sha256:ab"
	meta := mcp.Meta{mcpRefMeta: ref}
	for _, tc := range []struct {
		name, mimeType string
		data           []byte
		want           mcp.Content
	}{
		{"an image", "image/png", []byte{0x89, 'P'}, &mcp.ImageContent{Data: []byte{0x89, 'P'}, MIMEType: "image/png", Meta: meta}},
		{"a sound", "audio/wav", []byte("RIFF"), &mcp.AudioContent{Data: []byte("RIFF"), MIMEType: "audio/wav", Meta: meta}},
		{"a text", "text/plain; charset=utf-8", []byte("a note"), &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: ref, MIMEType: "text/plain; charset=utf-8", Text: "a note"}}},
		{"JSON", "application/json", []byte(`{"n":1}`), &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: ref, MIMEType: "application/json", Text: `{"n":1}`}}},
		{"text that is not UTF-8", "text/plain", []byte{0xff}, &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: ref, MIMEType: "text/plain", Blob: []byte{0xff}}}},
		{"bytes", "application/pdf", []byte("%PDF"), &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: ref, MIMEType: "application/pdf", Blob: []byte("%PDF")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, inlineContent(&mcp.ResourceLink{URI: ref, Name: "f"}, tc.data, tc.mimeType))
		})
	}
}
