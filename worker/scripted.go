//go:build scripted

package main

import (
	"github.com/agentflow/agentflow"
	"github.com/agentflow/agentflow/internal/scripted"
)

// scriptedModel serves the offline scripted model when AGENTFLOW_SCRIPT
// asks for it: linked into workers built with -tags scripted only (the
// docker-compose image, `starter up --production`), never into the
// production image.
func scriptedModel() agentflow.ScriptedModel { return scripted.Serve }
