package tools

import (
	"encoding/json"

	"github.com/agentflow/agentflow/internal/tools/kind"
	"github.com/agentflow/agentflow/internal/tools/mcptool"
	"github.com/agentflow/agentflow/internal/tools/openapitool"
	"github.com/agentflow/agentflow/internal/tools/pipelinetool"
)

// What a kind is made of and given (package kind, which the kinds in
// packages of their own import).
type (
	Tool       = kind.Tool
	Call       = kind.Call
	Blob       = kind.Blob
	Cache      = kind.Cache
	Output     = kind.Output
	File       = kind.File
	Kind       = kind.Kind
	ResolveEnv = kind.ResolveEnv
	Deps       = kind.Deps
	Composites = kind.Composites
	ToolSearch = kind.ToolSearch
	Processes  = kind.Processes
	Secrets    = kind.Secrets
	Knowledge  = kind.Knowledge
	Memories   = kind.Memories
)

// Bounds of a call's blobs and files (kind.Output.Files).
const (
	MaxBlobBytes = kind.MaxBlobBytes
	MaxFiles     = kind.MaxFiles
	MaxFileBytes = kind.MaxFileBytes
)

// Builtin returns the kinds every worker offers: those of this package,
// and those kept in packages of their own (pipelinetool, openapitool,
// mcptool).
func Builtin() []Kind {
	return []Kind{Calculator(), pipelinetool.ExecutePipeline(), pipelinetool.CompositePipeline(), SearchTools(), openapitool.OpenAPIAction(), PatchWorkflow(), mcptool.MCP(), DelegateToAgent(), AskUser(), Retrieve(), Remember(), Recall()}
}

func decodeArgs(args json.RawMessage, v any, want string) error {
	return kind.DecodeArgs(args, v, want)
}

func decodeConfig(raw json.RawMessage, v any, name string) error {
	return kind.DecodeConfig(raw, v, name)
}
