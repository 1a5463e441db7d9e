package catalog

import (
	"slices"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/program"
)

// codeMode checks an agent's code_mode as written: its shape and its
// limits against the runner's maxima. Its tools are checked once the
// agent's grants are resolved (checkCodeMode).
func (l *loader) codeMode(d *agentDoc) *agent.CodeMode {
	p := &d.CodeMode
	if p.raw == nil || p.bad {
		return nil
	}
	c, err := agent.ParseCodeMode(p.raw)
	if err != nil {
		l.addf(p.on(p.node), "%s", err.Error())
		return nil
	}
	if c == nil {
		return nil
	}
	if maxSec := int(program.MaxTime / time.Second); c.TimeSec > maxSec {
		l.addf(p.at("/time_sec"), "%d is over the limit of %d seconds, or 0 for the default, %d", c.TimeSec, maxSec, int(program.DefaultTime/time.Second))
	}
	if c.MaxCalls > program.MaxCalls {
		l.addf(p.at("/max_calls"), "%d is over the limit of %d, or 0 for the default, %d", c.MaxCalls, program.MaxCalls, program.DefaultCalls)
	}
	if c.MaxOutputBytes > program.MaxOutput {
		l.addf(p.at("/max_output_bytes"), "%d is over the limit of %d, or 0 for the default, %d", c.MaxOutputBytes, program.MaxOutput, program.DefaultOutput)
	}
	return c
}

// checkCodeMode resolves code_mode: true into every tool the agent is
// granted that a program can call (agent.ProgramCallable; the model
// calls the others itself), and checks that each tool a program may call is the agent's,
// named as a JavaScript identifier, and runs as a tool (delegation and
// questions to a person stay the model's own calls).
func (l *loader) checkCodeMode(def agentDef, a *agent.Agent) {
	c := a.CodeMode
	if c == nil {
		return
	}
	at := def.codeMode.on(def.codeMode.node)
	if c.All {
		resolved := &agent.CodeMode{TimeSec: c.TimeSec, MaxCalls: c.MaxCalls, MaxOutputBytes: c.MaxOutputBytes}
		for _, t := range a.Tools {
			if agent.ProgramCallable(t) {
				resolved.Tools = append(resolved.Tools, t.Name)
			}
		}
		if len(resolved.Tools) == 0 {
			l.addf(at, "agent %q has no tool a program can call", a.ID)
		}
		a.CodeMode = resolved
		c = resolved
	}
	for _, name := range c.Tools {
		i := slices.IndexFunc(a.Tools, func(t agent.Tool) bool { return t.Name == name })
		switch {
		case name == agent.RunProgramTool:
			l.addf(at, "a program cannot call %s", agent.RunProgramTool)
		case i < 0:
			l.addf(at, "tool %q is not one of agent %q's tools", name, a.ID)
		case a.Tools[i].Kind == agent.KindDelegate || a.Tools[i].Kind == agent.KindAskUser:
			l.addf(at, "tool %q is of kind %s, which only the model calls", name, a.Tools[i].Kind)
		}
	}
	for _, t := range a.Tools {
		if t.Name == agent.RunProgramTool {
			l.addf(at, "agent %q has a tool named %s: code mode offers its own", a.ID, agent.RunProgramTool)
		}
	}
}
