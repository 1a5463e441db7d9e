//go:build !scripted

package main

import "github.com/agentflow/agentflow"

// scriptedModel is none: a production worker links no scripted model, and
// refuses AGENTFLOW_SCRIPT=demo or a script file at start (build with
// -tags scripted to try agentflow offline).
func scriptedModel() agentflow.ScriptedModel { return nil }
