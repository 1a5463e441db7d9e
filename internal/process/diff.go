package process

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Summary says in a line what changed between two definitions, by node id
// and edge: "nodes added: price_check, send_email; edges added:
// fetch_flights → price_check". Both must satisfy the built-in rules.
func Summary(before, after json.RawMessage) string {
	b, a := graphOf(before), graphOf(after)
	var parts []string
	add := func(what string, list []string) {
		if len(list) > 0 {
			parts = append(parts, what+": "+listIDs(list))
		}
	}
	add("nodes added", minus(a.nodes, b.nodes))
	add("nodes removed", minus(b.nodes, a.nodes))
	add("nodes changed", changed(b, a))
	add("edges added", minus(a.edges, b.edges))
	add("edges removed", minus(b.edges, a.edges))
	if len(parts) == 0 {
		if string(before) == string(after) {
			return "no change"
		}
		return "fields outside nodes and edges changed"
	}
	return strings.Join(parts, "; ")
}

type graph struct {
	nodes []string
	body  map[string]string // node id → its JSON
	edges []string          // "from → to", with the condition when there is one
}

func graphOf(def json.RawMessage) graph {
	var d struct {
		Nodes []json.RawMessage `json:"nodes"`
		Edges []struct {
			From      string          `json:"from"`
			To        string          `json:"to"`
			Condition json.RawMessage `json:"condition"`
		} `json:"edges"`
	}
	g := graph{body: map[string]string{}}
	if json.Unmarshal(def, &d) != nil {
		return g
	}
	for _, n := range d.Nodes {
		var id struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(n, &id) == nil {
			g.nodes = append(g.nodes, id.ID)
			g.body[id.ID] = canonical(n)
		}
	}
	for _, e := range d.Edges {
		s := e.From + " → " + e.To
		if len(e.Condition) > 0 && string(e.Condition) != "null" {
			s += fmt.Sprintf(" (if %s)", clip(string(e.Condition)))
		}
		g.edges = append(g.edges, s)
	}
	return g
}

// canonical re-encodes a JSON value with sorted keys.
func canonical(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v) // decoded JSON re-encodes
	return string(b)
}

// minus is the items of a not in b, counting repeats.
func minus(a, b []string) []string {
	left := slices.Clone(b)
	var out []string
	for _, x := range a {
		if i := slices.Index(left, x); i >= 0 {
			left = slices.Delete(left, i, i+1)
			continue
		}
		out = append(out, x)
	}
	return out
}

// changed is the ids of nodes in both whose fields differ.
func changed(b, a graph) []string {
	var out []string
	for _, id := range a.nodes {
		if old, ok := b.body[id]; ok && old != a.body[id] {
			out = append(out, id)
		}
	}
	return out
}
