package catalog

import (
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agentflow/agentflow/internal/agent"
)

// retentionDoc is a tenant's retention: how long its blobs, results and
// transcripts are kept (agent.Retention), each a TTL such as 30d or 36h.
// The operator's TTLs bound them: a longer one is refused when the
// catalog is applied (store.ApplyCatalog), where the operator's are known.
type retentionDoc struct {
	Blobs       ttl `yaml:"blobs"`
	Results     ttl `yaml:"results"`
	Transcripts ttl `yaml:"transcripts"`
}

// ttl is a TTL (agent.ParseTTL); null is the same as leaving it out.
type ttl struct {
	pos
	d time.Duration
}

func (t *ttl) decode(l *loader, n *yaml.Node) {
	if isNull(n) {
		return
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		l.wrong(t.pos, n, "a TTL such as 30d or 36h")
		return
	}
	d, err := agent.ParseTTL(n.Value)
	if err != nil {
		l.addf(t.on(n), "%s", err.Error())
		return
	}
	t.d = d
}

// retention sets the tenant's retention.
func (l *loader) retention(t *tenant, d *retentionDoc, at pos) {
	if t.retention != nil {
		l.addf(at, "retention is already set for tenant %q: give it in one document", t.id)
		return
	}
	t.retention = &agent.Retention{Blobs: d.Blobs.d, Results: d.Results.d, Transcripts: d.Transcripts.d}
}
