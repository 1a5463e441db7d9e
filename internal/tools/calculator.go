package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"math/big"
	"slices"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/tools/kind"
)

// Calculator limits. They keep a hostile or runaway expression from
// eating memory or CPU: every call finishes in milliseconds.
const (
	calcMaxExpressionBytes = 4096
	calcMaxDepth           = 100  // nested parentheses and unary signs
	calcMaxBits            = 8192 // numerator and denominator of every value (≈ 2466 digits)
	calcMaxExponent        = 1000 // |n| in x^n and in 1e±n
	calcDefaultDigits      = 20
	calcMaxDigits          = 100
)

// calcParameters is the JSON Schema of the calculator's arguments.
const calcParameters = `{"type":"object","properties":{"expression":{"type":"string",` +
	`"description":"Arithmetic expression, e.g. \"(12.5 + 3) * 4 / 2^3\". Decimal numbers (12.5, -3, 1e-3), ` +
	`+ - * / % (remainder), ^ (integer power) and parentheses."}},` +
	`"required":["expression"],"additionalProperties":false}`

// Calculator returns the calculator kind. Its tools take
// {"expression": "..."} and compute the value exactly, with rational
// arithmetic: 0.1 + 0.2 is 0.3, and 2^100 is all 31 digits of it.
//
// Syntax: decimal numbers (12.5, .5, 3., 1e3, 2.5E-4; the exponent of a
// number is at most ±1000), binary + - * / and % (remainder of truncated
// division: the sign follows the dividend, 7.5 % 2 = 1.5, -7 % 3 = -1), ^
// (and **) raises to an integer power between -1000 and 1000, unary + and
// -, and parentheses. ^ binds tightest and is right-associative (2^3^2 =
// 2^9; -2^2 = -4; 2^-1 = 0.5); * / % bind tighter than + and -. The
// characters × ÷ and − (U+2212) are read as * / and -. Functions,
// variables, thousands separators and implicit multiplication ("2(3)") are
// errors whose message says so.
//
// Results: a value with a finite decimal expansion is written exactly, in
// plain decimal notation without an exponent and without trailing zeros
// (12.5*4 → "50", 1/8 → "0.125", 1e-3 → "0.001"). Any other value is
// rounded half away from zero to 20 significant digits (config "digits"
// changes that, 1–100) — all of its integer digits are kept when it has
// more — and the text says so: 1/3 → "0.33333333333333333333 (rounded)".
// Output.Data is {"expression", "result", "exact"} plus, for a rounded
// result, "fraction": the exact value as "p/q".
//
// Errors (agent.CodeInvalid) name the expression and the position of the
// problem, counted in characters from 0: `expression "2 +" is incomplete at
// position 3`. Division by zero, a non-integer or out-of-range exponent,
// and a value beyond 8192 bits of numerator or denominator are errors too.
func Calculator() Kind {
	return Kind{
		Name:        "calculator",
		Description: "Evaluate an arithmetic expression exactly (decimal numbers, + - * / % ^ and parentheses).",
		Parameters:  json.RawMessage(calcParameters),
		Config:      json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{"digits":{"type":"integer","minimum":1,"maximum":100,"description":"significant digits of a rounded result (default 20)"}}}`),
		Build:       buildCalculator,
		Local:       true,
	}
}

type calculator struct {
	digits int // significant digits of a rounded result
}

func buildCalculator(spec agent.Tool, _ Deps) (Tool, error) {
	var cfg struct {
		Digits *int `json:"digits"`
	}
	if raw := bytes.TrimSpace(spec.Config); len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		if err := kind.DecodeStrict(raw, &cfg); err != nil {
			return nil, agent.Errorf(agent.CodeInvalid, "calculator config: %v (the only setting is \"digits\")", err)
		}
	}
	c := &calculator{digits: calcDefaultDigits}
	if cfg.Digits != nil {
		if *cfg.Digits < 1 || *cfg.Digits > calcMaxDigits {
			return nil, agent.Errorf(agent.CodeInvalid, "calculator config: digits is %d; want 1 to %d", *cfg.Digits, calcMaxDigits)
		}
		c.digits = *cfg.Digits
	}
	return c, nil
}

// calcResult is the calculator's Output.Data.
type calcResult struct {
	Expression string `json:"expression"`
	Result     string `json:"result"`
	Exact      bool   `json:"exact"`
	Fraction   string `json:"fraction,omitempty"`
}

func (c *calculator) Run(_ context.Context, call Call) (Output, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(call.Args, &fields); err != nil || fields == nil {
		return Output{}, agent.Errorf(agent.CodeInvalid, `arguments must be a JSON object like {"expression": "12.5 * 4"}`)
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		if k != "expression" {
			keys = append(keys, k)
		}
	}
	if len(keys) > 0 {
		slices.Sort(keys)
		return Output{}, agent.Errorf(agent.CodeInvalid, `unknown argument %q: the only argument is "expression"`, keys[0])
	}
	raw, ok := fields["expression"]
	if !ok {
		return Output{}, agent.Errorf(agent.CodeInvalid, `argument "expression" is required, e.g. {"expression": "12.5 * 4"}`)
	}
	var expr string
	if err := json.Unmarshal(raw, &expr); err != nil {
		return Output{}, agent.Errorf(agent.CodeInvalid, `argument "expression" must be a string, e.g. {"expression": "12.5 * 4"}`)
	}

	v, err := evaluate(expr)
	if err != nil {
		return Output{}, err
	}
	res := calcResult{Expression: expr, Exact: true}
	var text string
	if s, ok := exactDecimal(v); ok {
		res.Result, text = s, s
	} else {
		res.Result = roundedDecimal(v, c.digits)
		res.Exact = false
		res.Fraction = v.RatString()
		text = res.Result + " (rounded)"
	}
	data, err := json.Marshal(res)
	if err != nil {
		return Output{}, err
	}
	return Output{Text: text, Data: data}, nil
}

// exactDecimal writes x in plain decimal notation if its expansion is
// finite, that is if its reduced denominator has no prime factors but 2
// and 5.
func exactDecimal(x *big.Rat) (string, bool) {
	den := new(big.Int).Set(x.Denom())
	twos := den.TrailingZeroBits()
	den.Rsh(den, twos)
	var fives uint
	five, q, r := big.NewInt(5), new(big.Int), new(big.Int)
	for {
		q.QuoRem(den, five, r)
		if r.Sign() != 0 {
			break
		}
		den.Set(q)
		fives++
	}
	if den.Cmp(big.NewInt(1)) != 0 {
		return "", false
	}
	// x = num / (2^twos * 5^fives) = num * 10^k / den with k = max(twos, fives).
	k := max(twos, fives)
	n := new(big.Int).Abs(x.Num())
	n.Mul(n, pow10(int(k)))
	n.Quo(n, x.Denom())
	return decimalString(n, int(k), x.Sign() < 0), true
}

// roundedDecimal writes x rounded to the given number of significant
// digits, keeping every integer digit. Ties cannot occur: a value with an
// infinite expansion is never exactly halfway between two decimals.
func roundedDecimal(x *big.Rat, digits int) string {
	num := new(big.Int).Abs(x.Num())
	den := x.Denom()
	if num.Sign() == 0 {
		return "0"
	}
	// With n and d the digit counts of num and den,
	// 10^(n-d-1) < |x| < 10^(n-d+1), so floor(log10|x|) is n-d-1 or n-d.
	e := len(num.String()) - len(den.String())
	if new(big.Rat).SetFrac(num, den).Cmp(new(big.Rat).SetFrac(pow10pos(e), pow10pos(-e))) < 0 {
		e--
	}
	frac := max(digits-1-e, 0)
	q, r := new(big.Int), new(big.Int)
	q.QuoRem(new(big.Int).Mul(num, pow10(frac)), den, r)
	if r.Lsh(r, 1).Cmp(den) >= 0 {
		q.Add(q, big.NewInt(1))
	}
	return decimalString(q, frac, x.Sign() < 0)
}

// decimalString writes n / 10^frac with trailing fractional zeros removed.
func decimalString(n *big.Int, frac int, neg bool) string {
	s := n.String()
	if frac > 0 {
		if len(s) <= frac {
			s = string(bytes.Repeat([]byte{'0'}, frac-len(s)+1)) + s
		}
		s = s[:len(s)-frac] + "." + s[len(s)-frac:]
		for s[len(s)-1] == '0' {
			s = s[:len(s)-1]
		}
		if s[len(s)-1] == '.' {
			s = s[:len(s)-1]
		}
	}
	if neg && s != "0" {
		s = "-" + s
	}
	return s
}

// pow10 returns 10^n for n >= 0.
func pow10(n int) *big.Int {
	return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil)
}

// pow10pos returns 10^n for n > 0 and 1 otherwise.
func pow10pos(n int) *big.Int {
	if n <= 0 {
		return big.NewInt(1)
	}
	return pow10(n)
}
