// Command stdio serves mcptest's file reader over stdio, as a local MCP
// server run by the worker: stdio --root DIR.
//
// It imports only mcptest.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentflow/agentflow/internal/tools/mcptest"
)

func main() {
	root := flag.String("root", ".", "the folder whose files the server reads")
	flag.Parse()
	if err := mcptest.Files(*root).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "stdio:", err)
		os.Exit(1)
	}
}
