package pipeline

import (
	"context"
	"fmt"
	"regexp"
	"unicode/utf8"

	"github.com/agentflow/agentflow/internal/words"
)

// regexOutputs names the fields regex_extract writes: a named group gives
// its name, an unnamed one <field>_<its number>, and a pattern without
// groups writes the whole match to <field>_match.
func regexOutputs(re *regexp.Regexp, field string) []string {
	if re.NumSubexp() == 0 {
		return []string{field + "_match"}
	}
	names := re.SubexpNames()[1:]
	out := make([]string, len(names))
	for i, n := range names {
		if n == "" {
			n = fmt.Sprintf("%s_%d", field, i+1)
		}
		out[i] = n
	}
	return out
}

// maxRegexpText is how much of each value regex_extract reads: with the
// pattern's size it bounds the time of one row's match.
const maxRegexpText = 64 << 10

// regexExtract runs regex_extract on the first match in each row's field
// (a string, or a number as its JSON text; its first 64 KiB). Every row gets every output
// field, so the table keeps one shape: a row whose field is missing, not
// text or does not match, and a group that takes no part in the match,
// get null, which table_filter can drop with {"op": "!=", "value": null}.
// An output field replaces a field of the same name. When no row matches,
// a warning says so.
func (e *engine) regexExtract(ctx context.Context, s step, rows []map[string]any) (Value, error) {
	if err := checkField(rows, "field", s.Field); err != nil {
		return Value{}, err
	}
	names := regexOutputs(s.re, s.Field)
	out := make([]map[string]any, len(rows))
	m := e.meter() // a pattern of many groups adds as many fields to every row
	matched := 0
	var example any
	for i, r := range rows {
		if err := ctx.Err(); err != nil { // every row: one match can take milliseconds
			return Value{}, err
		}
		row := cloneRow(r, len(names))
		for _, n := range names {
			row[n] = nil
		}
		v, _ := lookup(r, s.Field)
		if t, ok := text(v); ok {
			t = prefix(t, maxRegexpText)
			if loc := s.re.FindStringSubmatchIndex(t); loc != nil {
				matched++
				if s.re.NumSubexp() == 0 {
					row[names[0]] = t[loc[0]:loc[1]]
				}
				for g := 1; g <= s.re.NumSubexp(); g++ {
					if loc[2*g] >= 0 {
						row[names[g-1]] = t[loc[2*g]:loc[2*g+1]]
					}
				}
			} else if example == nil {
				example = v
			}
		}
		if err := m.add(row); err != nil {
			return Value{}, err
		}
		out[i] = row
	}
	if matched == 0 && len(rows) > 0 {
		hint := ""
		if example != nil {
			hint = fmt.Sprintf(" (e.g. %s)", describe(example))
		}
		e.warnf(s, "pattern %q matched no row's %s%s", words.Clip(s.Pattern, 100), s.Field, hint)
	}
	return TableOf(out), nil
}

// prefix cuts s to at most n bytes on a rune boundary.
func prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
