package tools

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/secrets"
	"github.com/agentflow/agentflow/internal/tools/kind"
	"github.com/agentflow/agentflow/internal/words"
)

// maxBuilt bounds the cache of built tools. Specs come from the catalog,
// so the cache normally holds a few dozen entries; the bound only keeps a
// stream of ever-changing specs from growing it without end.
const maxBuilt = 1024

// Registry holds the tool kinds a worker offers and the tools built from
// specs so far. It is safe for concurrent use.
type Registry struct {
	deps  Deps
	kinds map[string]Kind

	mu    sync.Mutex
	built map[[sha256.Size]byte]*built
}

// built is a cache entry. done is closed when tool or err is set, so
// concurrent first calls of one spec build it once.
type built struct {
	done chan struct{}
	tool Tool
	err  error
}

// NewRegistry returns a registry offering the given kinds; pass Builtin()
// and any others. deps are filled with defaults and given to every Build.
func NewRegistry(deps Deps, kinds ...Kind) (*Registry, error) {
	r := &Registry{
		deps:  deps.WithDefaults(),
		kinds: make(map[string]Kind, len(kinds)),
		built: make(map[[sha256.Size]byte]*built),
	}
	// Every secret a tool resolves is noted for the call (Execute cleans
	// its output of them) and refused when too short to be cleaned.
	r.deps.Secrets = secrets.Recording(r.deps.Secrets)
	for i, k := range kinds {
		switch {
		case k.Name == "":
			return nil, fmt.Errorf("tool kind %d: name is required", i)
		case k.Build == nil:
			return nil, fmt.Errorf("tool kind %q: Build is required", k.Name)
		case len(k.Parameters) > 0 && !kind.IsJSONObject(k.Parameters):
			return nil, fmt.Errorf("tool kind %q: parameters must be a JSON object schema", k.Name)
		case len(k.Config) > 0 && !kind.IsJSONObject(k.Config):
			return nil, fmt.Errorf("tool kind %q: config must be a JSON object schema", k.Name)
		}
		if _, dup := r.kinds[k.Name]; dup {
			return nil, fmt.Errorf("tool kind %q is registered twice", k.Name)
		}
		r.kinds[k.Name] = k
	}
	return r, nil
}

// Kind returns the kind with the given name.
func (r *Registry) Kind(name string) (Kind, bool) {
	k, ok := r.kinds[name]
	return k, ok
}

// Deps are the dependencies the registry gives every Build (filled with
// defaults), for callers that build or resolve specs outside Execute: the
// catalog loader, Resolve.
func (r *Registry) Deps() Deps { return r.deps }

// Kinds returns the registered kinds sorted by name.
func (r *Registry) Kinds() []Kind {
	out := make([]Kind, 0, len(r.kinds))
	for _, k := range r.kinds {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b Kind) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Execute runs one call of the tool described by spec with the model's
// arguments (a JSON object; empty means {}). Errors start with the tool's
// name, as the model knows it:
//   - agent.CodeNotFound: spec.Kind is not registered;
//   - agent.CodeInvalid: the arguments are not a JSON object or the tool
//     rejected them (the message says why, for the model), or the spec's
//     config is invalid;
//   - anything else: the tool failed.
//
// Every call of every kind comes through here, so here the call's output
// is cleaned of every secret the tool resolved during it (through
// Deps.Secrets, whatever it was for: a header, a query, a stdio server's
// environment): its text, data, preview, progress messages, custom events
// and error hold "[secret env:NAME]" where the value was, before anything
// stores, returns, sends or logs them. The egress client's Credentials clean what comes over
// HTTP before the tool reads it; this is the rule for everything else (a
// stdio server that prints its environment) and the net under it.
//
// The call's secrets are resolved for its tenant (secrets.WithTenant): a
// resolver scoped by the operator's grants (secrets.Scoped) refuses what
// the tenant may not name.
func (r *Registry) Execute(ctx context.Context, spec agent.Tool, call Call) (Output, error) {
	ctx = secrets.WithTenant(ctx, call.TenantID)
	ctx, seen := secrets.WithSeen(ctx)
	clean := &cleaner{seen: seen}
	if progress := call.Progress; progress != nil {
		call.Progress = func(m string) { progress(clean.redactor().String(m)) }
	}
	if emit := call.Emit; emit != nil {
		call.Emit = func(e agent.CustomEvent) error { return clean.emit(emit, e) }
	}
	out, err := r.execute(ctx, spec, call)
	if err == nil {
		out, err = clean.output(out)
	}
	if err != nil {
		name := cmp.Or(spec.Name, spec.Kind)
		return Output{}, clean.redactor().Error(fmt.Errorf("%s: %w", name, err))
	}
	return out, nil
}

// cleaner redacts a call's output with the secrets seen so far.
type cleaner struct {
	seen *secrets.Seen
	mu   sync.Mutex
	n    int // secrets red was made of
	red  *egress.Redactor
}

func (c *cleaner) redactor() *egress.Redactor {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.red == nil || c.seen.Len() != c.n {
		list := c.seen.Secrets()
		c.red, c.n = egress.NewRedactor(list), len(list)
	}
	return c.red
}

// emit cleans a custom event, then sends it. A secret's value where it
// cannot be replaced (outside a JSON string, or in the name or id, which
// allow no "[secret …]") keeps the event from being sent.
func (c *cleaner) emit(send func(agent.CustomEvent) error, e agent.CustomEvent) error {
	red := c.redactor()
	if red.Empty() {
		return send(e)
	}
	value := red.Bytes(e.Value)
	if red.String(e.Name) != e.Name || red.String(e.ID) != e.ID || !bytes.Equal(value, e.Value) && json.Valid(e.Value) && !json.Valid(value) {
		return agent.Errorf(agent.CodeInvalid, "custom %q holds a secret's value where it cannot be replaced: the event is not sent", red.String(e.Name))
	}
	e.Value = value
	return send(e)
}

// output cleans out. A value found in Data in a place that is not a JSON
// string (a number, say) cannot be replaced without breaking the JSON: the
// call fails rather than keep it.
func (c *cleaner) output(out Output) (Output, error) {
	red := c.redactor()
	if red.Empty() {
		return out, nil
	}
	out.Text = red.String(out.Text)
	var err error
	if out.Data, err = kind.CleanJSON(red, out.Data); err != nil {
		return Output{}, err
	}
	if out.Preview != nil {
		p := *out.Preview
		p.Fields = slices.Clone(p.Fields)
		for i := range p.Fields {
			p.Fields[i].Name = red.String(p.Fields[i].Name)
		}
		p.Sample = slices.Clone(p.Sample)
		for i := range p.Sample {
			if p.Sample[i], err = kind.CleanJSON(red, p.Sample[i]); err != nil {
				return Output{}, err
			}
		}
		out.Preview = &p
	}
	// A file's bytes are searched as they are: a secret a tool wrote into
	// a text file is replaced; in an image's bytes one would be there only
	// by chance, and is replaced all the same (the image is then broken,
	// which is the lesser harm).
	if len(out.Files) > 0 {
		files := slices.Clone(out.Files)
		for i := range files {
			files[i].Data = red.Bytes(files[i].Data)
			files[i].Name = red.String(files[i].Name)
		}
		out.Files = files
	}
	return out, nil
}

func (r *Registry) execute(ctx context.Context, spec agent.Tool, call Call) (Output, error) {
	raw := json.RawMessage(bytes.TrimSpace(call.Args))
	if len(raw) == 0 {
		// Models call argument-less tools with "" as often as with "{}".
		raw = json.RawMessage("{}")
	}
	if !kind.IsJSONObject(raw) {
		return Output{}, agent.Errorf(agent.CodeInvalid, "arguments must be a JSON object, not %s", words.Clip(string(raw), 80))
	}
	tool, err := r.tool(ctx, spec)
	if err != nil {
		return Output{}, err
	}
	if err := ctx.Err(); err != nil {
		return Output{}, err
	}
	call.Args = raw
	return tool.Run(ctx, call.WithDefaults())
}

// tool returns the built tool for spec, building it on first use.
func (r *Registry) tool(ctx context.Context, spec agent.Tool) (Tool, error) {
	kind, ok := r.kinds[spec.Kind]
	if !ok {
		return nil, agent.Errorf(agent.CodeNotFound, "unknown tool kind %q", spec.Kind)
	}
	key := specKey(spec)

	r.mu.Lock()
	b, ok := r.built[key]
	if !ok {
		if len(r.built) >= maxBuilt {
			clear(r.built)
		}
		b = &built{done: make(chan struct{})}
		r.built[key] = b
	}
	r.mu.Unlock()

	if ok {
		select {
		case <-b.done:
			return b.tool, b.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}

	b.tool, b.err = r.build(kind, spec)
	if b.err != nil {
		// Failed builds are not cached: the next call tries again.
		r.mu.Lock()
		if r.built[key] == b {
			delete(r.built, key)
		}
		r.mu.Unlock()
	}
	close(b.done)
	return b.tool, b.err
}

func (r *Registry) build(kind Kind, spec agent.Tool) (tool Tool, err error) {
	tool, err = kind.Build(spec, r.deps)
	if err != nil {
		return nil, fmt.Errorf("configure: %w", err)
	}
	if tool == nil {
		return nil, fmt.Errorf("configure: kind %q built no tool", kind.Name)
	}
	r.deps.Logger.Debug("tool built", zap.String("tool", spec.Name), zap.String("kind", spec.Kind))
	return tool, nil
}

// specKey hashes every field of spec, each prefixed by its length so that
// no two different specs can produce the same byte stream.
func specKey(spec agent.Tool) [sha256.Size]byte {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, f := range []string{spec.Name, spec.Kind, spec.Description, string(spec.Parameters), spec.Approval, string(spec.Config)} {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(f)))])
		h.Write([]byte(f))
	}
	var key [sha256.Size]byte
	h.Sum(key[:0])
	return key
}
