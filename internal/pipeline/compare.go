package pipeline

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// number is a JSON number read for comparison: integers that fit int64 are
// compared exactly, others as float64.
type number struct {
	i     int64
	f     float64
	isInt bool
}

// toNumber returns v as a number when it is one, or a string holding a
// JSON number literal.
func toNumber(v any) (number, bool) {
	switch x := v.(type) {
	case json.Number:
		return parseNumber(string(x))
	case string:
		if !isNumeric(x) {
			return number{}, false
		}
		return parseNumber(x)
	case float64:
		return fromFloat(x)
	case float32:
		return fromFloat(float64(x))
	case int:
		return number{i: int64(x), f: float64(x), isInt: true}, true
	case int64:
		return number{i: x, f: float64(x), isInt: true}, true
	case *big.Int:
		if x.IsInt64() {
			return number{i: x.Int64(), f: float64(x.Int64()), isInt: true}, true
		}
		f, _ := new(big.Float).SetInt(x).Float64()
		return number{f: f}, true
	}
	return number{}, false
}

func parseNumber(s string) (number, bool) {
	// Only a literal without fraction or exponent can be an int64; trying
	// others would cost ParseInt's error allocation on every decimal.
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return number{i: i, f: float64(i), isInt: true}, true
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return number{}, false
	}
	return fromFloat(f)
}

func fromFloat(f float64) (number, bool) {
	if math.IsNaN(f) {
		return number{}, false
	}
	if f == math.Trunc(f) && f >= -(1<<63) && f < 1<<63 {
		return number{i: int64(f), f: f, isInt: true}, true
	}
	return number{f: f}, true
}

func (a number) compare(b number) int {
	if a.isInt && b.isInt {
		return cmp.Compare(a.i, b.i)
	}
	return cmp.Compare(a.f, b.f)
}

// String writes the number in its shortest form, the same for 1, 1.0 and "1".
func (a number) String() string {
	if a.isInt {
		return strconv.FormatInt(a.i, 10)
	}
	return strconv.FormatFloat(a.f, 'g', -1, 64)
}

// isNumeric reports whether s is a JSON number literal: 12, -3.5, 1e3, but
// not 007, +1, " 1" or NaN.
func isNumeric(s string) bool {
	i, n := 0, len(s)
	if i < n && s[i] == '-' {
		i++
	}
	switch {
	case i < n && s[i] == '0':
		i++
	case i < n && '1' <= s[i] && s[i] <= '9':
		for i < n && isDigit(s[i]) {
			i++
		}
	default:
		return false
	}
	if i < n && s[i] == '.' {
		i++
		if i >= n || !isDigit(s[i]) {
			return false
		}
		for i < n && isDigit(s[i]) {
			i++
		}
	}
	if i < n && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < n && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= n || !isDigit(s[i]) {
			return false
		}
		for i < n && isDigit(s[i]) {
			i++
		}
	}
	return i == n
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// equal compares two values by type: numbers (and numeric strings, when
// both sides are) as numbers, strings and booleans as themselves; null
// equals null only.
func equal(a, b any) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if na, ok := toNumber(a); ok {
		if nb, ok := toNumber(b); ok {
			return na.compare(nb) == 0
		}
	}
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	}
	return false
}

// order compares two values for < <= > >=: numbers as numbers, strings as
// strings; ok is false when they cannot be compared.
func order(a, b any) (c int, ok bool) {
	if na, ok := toNumber(a); ok {
		if nb, ok := toNumber(b); ok {
			return na.compare(nb), true
		}
	}
	x, ok1 := a.(string)
	y, ok2 := b.(string)
	if ok1 && ok2 {
		return strings.Compare(x, y), true
	}
	return 0, false
}

// Classes of sortKey, in sort order.
const (
	classNumber = iota
	classString
	classBool
	classOther
	classNull
)

// sortKey is a value prepared for sorting (see the package doc).
type sortKey struct {
	class int
	n     number
	s     string
	b     bool
}

func keyOf(v any) sortKey {
	if v == nil {
		return sortKey{class: classNull}
	}
	if n, ok := toNumber(v); ok {
		return sortKey{class: classNumber, n: n}
	}
	switch x := v.(type) {
	case string:
		return sortKey{class: classString, s: x}
	case bool:
		return sortKey{class: classBool, b: x}
	}
	return sortKey{class: classOther}
}

// compareKeys orders keys ascending; null last.
func compareKeys(a, b sortKey) int {
	if c := cmp.Compare(a.class, b.class); c != 0 {
		return c
	}
	switch a.class {
	case classNumber:
		return a.n.compare(b.n)
	case classString:
		return strings.Compare(a.s, b.s)
	case classBool:
		switch {
		case a.b == b.b:
			return 0
		case !a.b:
			return -1
		}
		return 1
	}
	return 0
}

// groupKey is v as a map key: numbers and numeric strings by their value
// (so 1, 1.0 and "1" meet), strings, booleans and null by themselves,
// objects and arrays by their JSON.
func groupKey(v any) string {
	if v == nil {
		return "z"
	}
	if n, ok := toNumber(v); ok {
		return "n" + n.String()
	}
	switch x := v.(type) {
	case string:
		return "s" + x
	case bool:
		return "b" + strconv.FormatBool(x)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("x%v", v)
	}
	return "j" + string(b)
}
