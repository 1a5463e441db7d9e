// Package words holds the few helpers every package uses to write
// messages and read settings: Clip (a value quoted in an error, cut to a
// bound), Listed (names in a message), Count ("2 steps") and ListEntries
// (a comma-separated setting). It imports only the standard library, so that the domain
// (internal/agent) and everything else can use it.
package words

import (
	"fmt"
	"strings"
)

// ListEntries splits a comma-separated setting (AGENTFLOW_SECRETS, an
// allowlist, a role map) into its entries, trimmed, without the empty ones
// a trailing or doubled comma leaves.
func ListEntries(v string) []string {
	var out []string
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// Listed names things in a message: "none" for none, else the first most
// of them, comma-separated, and how many more there are.
func Listed(names []string, most int) string {
	if len(names) == 0 {
		return "none"
	}
	if len(names) > most {
		return strings.Join(names[:most], ", ") + fmt.Sprintf(" and %d more", len(names)-most)
	}
	return strings.Join(names, ", ")
}

// Count is n of noun, in English: "1 step", "2 steps".
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// Clip shortens s to at most n bytes, cut at a rune boundary, marking the
// cut with "…".
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
