package pipeline

import (
	"context"
	"errors"
	"time"

	"github.com/itchyny/timefmt-go"
)

// parseDate runs parse_date as the package doc describes; a number is
// parsed as its text (for %s), a zone is read by %z or %Z, and the warning
// about values that did not parse shows the first.
func (e *engine) parseDate(ctx context.Context, s step, rows []map[string]any) (Value, error) {
	if err := checkField(rows, "field", s.Field); err != nil {
		return Value{}, err
	}
	out := make([]map[string]any, len(rows))
	parsed, failed := 0, 0
	var firstErr error
	firstRow, firstVal := 0, any(nil)
	for i, r := range rows {
		if err := tick(ctx, i); err != nil {
			return Value{}, err
		}
		out[i] = r
		v, _ := lookup(r, s.Field)
		t, ok := text(v)
		if v == nil || (ok && t == "") {
			continue
		}
		var tm time.Time
		err := errNotText
		if ok {
			tm, err = timefmt.Parse(t, s.Format)
		}
		if err != nil {
			if failed == 0 {
				firstErr, firstRow, firstVal = err, i, v
			}
			failed++
			continue
		}
		parsed++
		out[i] = withField(r, s.Field, tm.Format(time.RFC3339Nano))
	}
	if failed == 0 {
		return TableOf(out), nil
	}
	reason := "it is not a string"
	if firstErr != errNotText {
		reason = timefmtReason(firstErr)
	}
	if parsed == 0 {
		return Value{}, invalidf("row %d: %s %s does not match format %q (%s); no value matched, so fix the format (strftime: %%Y-%%m-%%d, %%d/%%m/%%Y %%H:%%M, %%Y-%%m-%%dT%%H:%%M:%%S%%z, ...)",
			firstRow, s.Field, describe(firstVal), s.Format, reason)
	}
	e.warnf(s, "%d of %d values did not match format %q and were left as they were; the first is row %d: %s (%s)",
		failed, failed+parsed, s.Format, firstRow, describe(firstVal), reason)
	return TableOf(out), nil
}

// errNotText marks a value parse_date cannot read as text.
var errNotText = errors.New("not a string")
