package scripted

import (
	"fmt"
	"io"
)

// Serve serves the script name names on a free loopback port — "demo"
// for the built-in demo script, else a script file — and returns its
// server, whose URL() a provider's base URL points at. It is what a
// worker built for trying agentflow offline runs in-process
// (server.Config.ScriptedModel); production workers do not link this
// package.
func Serve(name string) (io.Closer, string, error) {
	script := Demo()
	if name != "demo" {
		var err error
		if script, err = LoadFile(name); err != nil {
			return nil, "", fmt.Errorf("load script: %w", err)
		}
	}
	srv, err := Start("127.0.0.1:0", script, Options{})
	if err != nil {
		return nil, "", fmt.Errorf("start scripted model: %w", err)
	}
	return srv, srv.URL(), nil
}
