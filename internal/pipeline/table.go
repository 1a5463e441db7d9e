package pipeline

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// sort runs table_sort: stable, by the order of the package doc, null and
// missing values last in both directions.
func (e *engine) sort(ctx context.Context, s step, rows []map[string]any) (Value, error) {
	if err := checkField(rows, "field", s.Field); err != nil {
		return Value{}, err
	}
	// Keys are computed once per row: comparing parses numbers, and a sort
	// compares n·log n times.
	type keyed struct {
		key sortKey
		idx int
		row map[string]any
	}
	ks := make([]keyed, len(rows))
	for i, r := range rows {
		if err := tick(ctx, i); err != nil {
			return Value{}, err
		}
		v, _ := lookup(r, s.Field)
		ks[i] = keyed{keyOf(v), i, r}
	}
	desc := s.Order == "desc"
	// Ties fall back to the input position: that makes the sort stable
	// while using the faster unstable algorithm.
	slices.SortFunc(ks, func(a, b keyed) int {
		var c int
		switch {
		case a.key.class == classNull || b.key.class == classNull:
			c = compareKeys(a.key, b.key)
		case desc:
			c = compareKeys(b.key, a.key)
		default:
			c = compareKeys(a.key, b.key)
		}
		if c == 0 {
			return cmp.Compare(a.idx, b.idx)
		}
		return c
	})
	if err := ctx.Err(); err != nil {
		return Value{}, err
	}
	out := make([]map[string]any, len(ks))
	for i, k := range ks {
		out[i] = k.row
	}
	return TableOf(out), nil
}

// filter runs table_filter. Rows whose value cannot be compared by the
// condition's op (a string against a number by <) are dropped, and a
// warning says how many.
func (e *engine) filter(ctx context.Context, s step, rows []map[string]any) (Value, error) {
	c := s.Condition
	if err := checkField(rows, "condition.field", c.Field); err != nil {
		return Value{}, err
	}
	out := make([]map[string]any, 0, len(rows)/2)
	incomparable, example := 0, any(nil)
	for i, r := range rows {
		if err := tick(ctx, i); err != nil {
			return Value{}, err
		}
		v, _ := lookup(r, c.Field)
		ok, comparable := matches(c, v)
		if !comparable {
			if incomparable == 0 {
				example = v
			}
			incomparable++
		}
		if ok {
			out = append(out, r)
		}
	}
	if incomparable > 0 {
		e.warnf(s, "%d rows were dropped because their %s (e.g. %s) cannot be compared with %s by %q", incomparable, c.Field, describe(example), describe(c.Value), c.Op)
	}
	return TableOf(slices.Clip(out)), nil
}

// matches reports whether v (a row's value, nil when missing) meets c;
// comparable is false when v is present but of a type c.Op cannot compare
// with c.Value.
func matches(c *Condition, v any) (ok, comparable bool) {
	switch c.Op {
	case "=":
		return equal(v, c.Value), true
	case "!=":
		return !equal(v, c.Value), true
	case "in":
		for _, want := range c.Value.([]any) {
			if equal(v, want) {
				return true, true
			}
		}
		return false, true
	case "contains":
		return contains(v, c.Value), true
	}
	if v == nil {
		return false, true
	}
	o, ok := order(v, c.Value)
	if !ok {
		return false, false
	}
	switch c.Op {
	case "<":
		return o < 0, true
	case "<=":
		return o <= 0, true
	case ">":
		return o > 0, true
	}
	return o >= 0, true // >=
}

// contains finds want in a string (as text, case-sensitive) or among the
// elements of an array.
func contains(v, want any) bool {
	switch x := v.(type) {
	case string:
		t, ok := want.(string)
		if !ok {
			if t, ok = text(want); !ok {
				if b, isBool := want.(bool); isBool {
					t, ok = strconv.FormatBool(b), true
				}
			}
		}
		return ok && strings.Contains(x, t)
	case []any:
		return slices.ContainsFunc(x, func(e any) bool { return equal(e, want) })
	}
	return false
}

// selectFields runs table_select: each row keeps the fields named, in that
// order; a field a row lacks is null in it.
func (e *engine) selectFields(ctx context.Context, s step, rows []map[string]any) (Value, error) {
	for _, f := range s.Fields {
		if err := checkField(rows, "fields", f); err != nil {
			return Value{}, err
		}
	}
	out := make([]map[string]any, len(rows))
	m := e.meter() // fields a row lacks become nulls, and paths may overlap (a, a.b)
	for i, r := range rows {
		if err := tick(ctx, i); err != nil {
			return Value{}, err
		}
		row := make(map[string]any, len(s.Fields))
		for _, f := range s.Fields {
			row[f], _ = lookup(r, f)
		}
		if err := m.add(row); err != nil {
			return Value{}, err
		}
		out[i] = row
	}
	return TableOf(out), nil
}

// aggName names groupby's aggregate field: count, count_<field>,
// sum_<field>, ...
func aggName(agg, field string) string {
	if field == "" {
		return agg
	}
	return agg + "_" + field
}

// group is one group of a groupby.
type group struct {
	by    []any // the first row's values of the by fields
	count int   // rows (count without a field) or values that are not null
	isum  int64 // sum while every value is an integer and it fits
	fsum  float64
	ints  bool // isum is exact
	best  any  // min or max so far
	key   sortKey
}

// groupBy runs groupby. Groups come out in the order they first appear;
// null and missing values of the aggregated field are skipped, and a value
// sum or avg cannot add is an error naming its row.
func (e *engine) groupBy(ctx context.Context, s step, rows []map[string]any) (Value, error) {
	for _, f := range s.By {
		if err := checkField(rows, "by", f); err != nil {
			return Value{}, err
		}
	}
	if s.Field != "" {
		if err := checkField(rows, "field", s.Field); err != nil {
			return Value{}, err
		}
	}
	index := map[string]int{}
	var groups []*group
	var key strings.Builder
	// Each group's row is measured when the group appears, so that the
	// index of groups stays within a small multiple of MaxBytes; and each
	// row's by values are measured before their key is built, so that
	// overlapping paths (a, a.b, a.b.c) cannot make one key huge.
	m := e.meter()
	by := make([]any, len(s.By))
	for i, r := range rows {
		if err := tick(ctx, i); err != nil {
			return Value{}, err
		}
		size := sizer{limit: e.limits.MaxBytes}
		for j, f := range s.By {
			by[j], _ = lookup(r, f)
			if err := size.walk(by[j], 1); errors.Is(err, errTooLarge) {
				return Value{}, tooLarge("the output", e.limits.MaxBytes)
			} else if err != nil {
				return Value{}, err
			}
		}
		key.Reset()
		for _, v := range by {
			k := groupKey(v)
			key.WriteString(strconv.Itoa(len(k)))
			key.WriteByte(':')
			key.WriteString(k)
		}
		gi, ok := index[key.String()]
		if !ok {
			g := &group{ints: true, by: slices.Clone(by)}
			if err := m.add(g.row(s, nil)); err != nil {
				return Value{}, err
			}
			gi = len(groups)
			index[key.String()] = gi
			groups = append(groups, g)
		}
		if err := groups[gi].add(s, i, r); err != nil {
			return Value{}, err
		}
	}
	if len(s.By) == 0 && len(groups) == 0 {
		groups = append(groups, &group{ints: true}) // a total over no rows
	}
	out := make([]map[string]any, len(groups))
	for i, g := range groups {
		out[i] = g.row(s, g.result(s.Agg))
	}
	return TableOf(out), nil
}

// row is the group's output row with the aggregate's value.
func (g *group) row(s step, agg any) map[string]any {
	row := make(map[string]any, len(s.By)+1)
	for j, f := range s.By {
		row[f] = g.by[j]
	}
	row[aggName(s.Agg, s.Field)] = agg
	return row
}

func (g *group) add(s step, i int, r map[string]any) error {
	if s.Field == "" {
		g.count++
		return nil
	}
	v, _ := lookup(r, s.Field)
	if v == nil {
		return nil
	}
	g.count++
	switch s.Agg {
	case "sum", "avg":
		n, ok := toNumber(v)
		if !ok {
			return invalidf("row %d: %s is %s, not a number; %s adds numbers: drop such rows with table_filter first", i, s.Field, describe(v), s.Agg)
		}
		if g.ints && n.isInt {
			if sum, overflow := addInt(g.isum, n.i); !overflow {
				g.isum = sum
			} else {
				g.ints = false
			}
		} else {
			g.ints = false
		}
		g.fsum += n.f
	case "min", "max":
		k := keyOf(v)
		c := compareKeys(k, g.key)
		if g.best == nil || (s.Agg == "min" && c < 0) || (s.Agg == "max" && c > 0) {
			g.best, g.key = v, k
		}
	}
	return nil
}

func addInt(a, b int64) (int64, bool) {
	s := a + b
	return s, (a > 0 && b > 0 && s < 0) || (a < 0 && b < 0 && s >= 0)
}

func (g *group) result(agg string) any {
	switch agg {
	case "count":
		return g.count
	case "sum":
		if g.ints {
			return json.Number(strconv.FormatInt(g.isum, 10))
		}
		return floatNumber(g.fsum)
	case "avg":
		if g.count == 0 {
			return nil
		}
		return floatNumber(g.fsum / float64(g.count))
	}
	return g.best
}

// floatNumber writes f as a JSON number (null when it is not finite).
func floatNumber(f float64) any {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
}

// join runs join: each left row meets the right rows whose on value
// equals its own (as table_filter's = compares, so 1 and "1" meet), in
// left order, then right order. A right field whose name a left row
// already has is named <name>_right. how "left" keeps left rows without a
// match, with the right fields null.
func (e *engine) join(ctx context.Context, s step, in Value) (Value, error) {
	leftVal := in
	if s.Left != "" {
		var err error
		if leftVal, err = e.load(ctx, s.Left); err != nil {
			return Value{}, fmt.Errorf("left: %w", err)
		}
	}
	left, err := asTable(leftVal)
	if err != nil {
		return Value{}, fmt.Errorf("left: %w", err)
	}
	rightVal, err := e.load(ctx, s.Right)
	if err != nil {
		return Value{}, fmt.Errorf("right: %w", err)
	}
	right, err := asTable(rightVal)
	if err != nil {
		return Value{}, fmt.Errorf("right: %w", err)
	}
	if err := checkField(left, "on (in the left table)", s.On); err != nil {
		return Value{}, err
	}
	if err := checkField(right, "on (in the right table)", s.On); err != nil {
		return Value{}, err
	}
	index := map[string][]int{}
	for i, r := range right {
		if err := tick(ctx, i); err != nil {
			return Value{}, err
		}
		if v, _ := lookup(r, s.On); v != nil {
			k := groupKey(v)
			index[k] = append(index[k], i)
		}
	}
	var rightFields []string
	if s.How == "left" {
		rightFields = fieldsOfAll(right)
	}
	var out []map[string]any
	m := e.meter() // a left row repeats once per match
	for i, l := range left {
		if err := tick(ctx, i); err != nil {
			return Value{}, err
		}
		var matched []int
		if v, _ := lookup(l, s.On); v != nil {
			matched = index[groupKey(v)]
		}
		if len(matched) == 0 && s.How == "left" {
			row := cloneRow(l, len(rightFields))
			for _, f := range rightFields {
				if f != s.On {
					row[rightName(l, f)] = nil
				}
			}
			if err := m.add(row); err != nil {
				return Value{}, err
			}
			out = append(out, row)
		}
		for _, j := range matched {
			if len(out) >= e.limits.MaxRows {
				return Value{}, invalidf("the join makes more than %d rows: %q repeats on both sides; make it unique on one side (groupby) or filter first", e.limits.MaxRows, s.On)
			}
			row := cloneRow(l, len(right[j]))
			for f, v := range right[j] {
				if f != s.On {
					row[rightName(l, f)] = v
				}
			}
			if err := m.add(row); err != nil {
				return Value{}, err
			}
			out = append(out, row)
		}
	}
	return TableOf(out), nil
}

// rightName is the name of a right field in a row joined to left.
func rightName(left map[string]any, f string) string {
	if _, clash := left[f]; clash {
		return f + "_right"
	}
	return f
}

// fieldsOfAll returns the field names of every row, sorted.
func fieldsOfAll(rows []map[string]any) []string {
	seen := map[string]bool{}
	for _, r := range rows {
		for k := range r {
			seen[k] = true
		}
	}
	return sortedKeys(seen)
}
