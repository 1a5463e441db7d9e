package mcptool

import "time"

// What the tests of package mcptool_test, which run the kind through
// tools.Registry (it imports this package), use of its insides.
var (
	DecodeMCPConfig = decodeMCPConfig
	MCPOutput       = mcpOutput
	MCPToolName     = mcpToolName
	ReservedEnv     = reservedEnv
	MCPDelivery     = mcpDelivery
)

type MCPConfig = mcpConfig

const MCPCallMargin = mcpCallMargin

// Keys are the keys of the sessions open.
func (p *Sessions) Keys() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var keys []string
	for k := range p.sessions {
		keys = append(keys, k)
	}
	return keys
}

// Timeout is a call's timeout.
func (c mcpConfig) Timeout() time.Duration { return c.timeout() }
