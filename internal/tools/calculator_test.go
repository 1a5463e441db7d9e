package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

func calcSpec(config string) agent.Tool {
	s := agent.Tool{Name: "calculator", Kind: "calculator"}
	if config != "" {
		s.Config = json.RawMessage(config)
	}
	return s
}

func newTestRegistry(t testing.TB) *Registry {
	t.Helper()
	r, err := NewRegistry(Deps{}, Builtin()...)
	require.NoError(t, err)
	return r
}

func exprArgs(expr string) string {
	b, _ := json.Marshal(map[string]string{"expression": expr})
	return string(b)
}

func TestCalculatorResults(t *testing.T) {
	r := newTestRegistry(t)
	tests := []struct {
		expr string
		want string // Output.Text
	}{
		{"12.5 * 4", "50"},
		{"1/8", "0.125"},
		{"0.1 + 0.2", "0.3"},
		{"0.1 + 0.2 - 0.3", "0"},
		{"1 - 0.9", "0.1"},
		{"3 * 1.1", "3.3"},
		{"2^100", "1267650600228229401496703205376"},
		{"2**10", "1024"},
		{"2^-1", "0.5"},
		{"2^-10", "0.0009765625"},
		{"(-2)^3", "-8"},
		{"-2^2", "-4"},
		{"(-2)^2", "4"},
		{"2^3^2", "512"},
		{"0^0", "1"},
		{"1.5^2", "2.25"},
		{"1 + 2 * 3", "7"},
		{"(1 + 2) * 3", "9"},
		{"10 - 4 - 3", "3"},
		{"100 / 10 / 5", "2"},
		{"-3", "-3"},
		{"--3", "3"},
		{"+-+3", "-3"},
		{"-(2 + 3) * 2", "-10"},
		{"2 * -3", "-6"},
		{"7 % 3", "1"},
		{"-7 % 3", "-1"},
		{"7 % -3", "1"},
		{"7.5 % 2", "1.5"},
		{"1e3", "1000"},
		{"2.5E-4", "0.00025"},
		{"1e+2", "100"},
		{"1e-30", "0.000000000000000000000000000001"},
		{"1e-30 * 1e30", "1"},
		{"1e-30 + 1", "1.000000000000000000000000000001"},
		{".5 + 3.", "3.5"},
		{"000012.5000", "12.5"},
		{"  ( ( 1 ) )  ", "1"},
		{"6 × 7", "42"},
		{"84 ÷ 2", "42"},
		{"50 − 8", "42"},
		{"1\t+\n1", "2"},
		{"12345678901234567890 * 98765432109876543210", "1219326311370217952237463801111263526900"},
		{"-0", "0"},
		{"0 * -5", "0"},
		{"1/3", "0.33333333333333333333 (rounded)"},
		{"2/3", "0.66666666666666666667 (rounded)"},
		{"-2/3", "-0.66666666666666666667 (rounded)"},
		{"1/7", "0.14285714285714285714 (rounded)"},
		{"10/3", "3.3333333333333333333 (rounded)"},
		{"1e30/3", "333333333333333333333333333333 (rounded)"},
		{"1e-30/3", "0.00000000000000000000000000000033333333333333333333 (rounded)"},
		{"3 - 1/3", "2.6666666666666666667 (rounded)"},
		{"1/3 * 3", "1"},
		{"(1/3 + 1/6) * 2", "1"},
		{"9.99999999999999999999999 + 1/3e30", "10 (rounded)"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			out, err := r.Execute(context.Background(), calcSpec(""), Call{Args: json.RawMessage(exprArgs(tt.expr))})
			require.NoError(t, err)
			require.Equal(t, tt.want, out.Text)
			var data calcResult
			require.NoError(t, json.Unmarshal(out.Data, &data))
			require.Equal(t, tt.expr, data.Expression)
			require.Equal(t, strings.TrimSuffix(tt.want, " (rounded)"), data.Result)
			require.Equal(t, !strings.HasSuffix(tt.want, " (rounded)"), data.Exact)
			require.Equal(t, !data.Exact, data.Fraction != "")
		})
	}
}

func TestCalculatorData(t *testing.T) {
	r := newTestRegistry(t)
	out, err := r.Execute(context.Background(), calcSpec(""), Call{Args: json.RawMessage(`{"expression":"1/3"}`)})
	require.NoError(t, err)
	require.JSONEq(t, `{"expression":"1/3","result":"0.33333333333333333333","exact":false,"fraction":"1/3"}`, string(out.Data))

	out, err = r.Execute(context.Background(), calcSpec(""), Call{Args: json.RawMessage(`{"expression":"12.5*4"}`)})
	require.NoError(t, err)
	require.JSONEq(t, `{"expression":"12.5*4","result":"50","exact":true}`, string(out.Data))
}

func TestCalculatorDigitsConfig(t *testing.T) {
	r := newTestRegistry(t)
	out, err := r.Execute(context.Background(), calcSpec(`{"digits": 5}`), Call{Args: json.RawMessage(`{"expression":"2/3"}`)})
	require.NoError(t, err)
	require.Equal(t, "0.66667 (rounded)", out.Text)
	out, err = r.Execute(context.Background(), calcSpec(`{"digits": 5}`), Call{Args: json.RawMessage(`{"expression":"123456789/7"}`)})
	require.NoError(t, err)
	require.Equal(t, "17636684 (rounded)", out.Text, "integer digits are kept")
	out, err = r.Execute(context.Background(), calcSpec(`{"digits": 1}`), Call{Args: json.RawMessage(`{"expression":"0.96 + 1/300"}`)})
	require.NoError(t, err)
	require.Equal(t, "1 (rounded)", out.Text, "rounding carries into a new digit")
}

func TestCalculatorConfigErrors(t *testing.T) {
	for _, cfg := range []string{`{"digits": 0}`, `{"digits": 101}`, `{"precision": 5}`, `[1]`, `{"digits": "5"}`} {
		t.Run(cfg, func(t *testing.T) {
			_, err := Calculator().Build(calcSpec(cfg), Deps{}.WithDefaults())
			require.Error(t, err)
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "code of %v", err)
			require.Contains(t, err.Error(), "calculator config")
		})
	}
	for _, cfg := range []string{"", "null", "{}", `{"digits": 30}`} {
		_, err := Calculator().Build(calcSpec(cfg), Deps{}.WithDefaults())
		require.NoError(t, err, cfg)
	}
}

func TestCalculatorErrors(t *testing.T) {
	r := newTestRegistry(t)
	tests := []struct {
		name string
		args string
		want string // the whole message, or a part of it when partial
		part bool
	}{
		{"incomplete", exprArgs("2 +"), `calculator: expression "2 +" is incomplete at position 3: a number or "(" is missing`, false},
		{"unclosed paren", exprArgs("(1 + 2"), `calculator: expression "(1 + 2" is incomplete at position 6: the "(" at position 0 is not closed`, false},
		{"unmatched paren", exprArgs("1 + 2)"), `calculator: expression "1 + 2)" has an unmatched ")" at position 5`, false},
		{"empty parens", exprArgs("()"), `has ")" at position 1 where a number is expected`, true},
		{"division by zero", exprArgs("1 / (2 - 2)"), `calculator: expression "1 / (2 - 2)" divides by zero at position 2`, false},
		{"remainder by zero", exprArgs("5 % 0"), `takes a remainder of division by zero at position 2`, true},
		{"zero negative power", exprArgs("0^-1"), `divides by zero at position 1`, true},
		{"unknown name", exprArgs("sqrt(2)"), `has the name "sqrt" at position 0; functions, variables and constants are not supported`, true},
		{"variable", exprArgs("2 + x"), `has the name "x" at position 4`, true},
		{"implicit multiplication", exprArgs("2(3)"), `has "(" at position 1 where an operator is expected; write * for multiplication`, true},
		{"number after paren", exprArgs("(2)3"), `has "3" at position 3 where an operator is expected`, true},
		{"thousands separator", exprArgs("1,000 + 1"), `has an unexpected "," at position 1; write numbers without thousands separators`, true},
		{"unexpected char", exprArgs("2 $ 3"), `has an unexpected "$" at position 2; only numbers, + - * / % ^ and parentheses are allowed`, true},
		{"operator without operand", exprArgs("× 2"), `has "×" at position 0 where a number is expected`, true},
		{"position after multibyte", exprArgs("6×7 $"), `has an unexpected "$" at position 4`, true},
		{"double operator", exprArgs("2 * / 3"), `has "/" at position 4 where a number is expected`, true},
		{"lone dot", exprArgs("1 + ."), `has "." without digits at position 4`, true},
		{"incomplete exponent", exprArgs("2e"), `has a number with an incomplete exponent at position 0`, true},
		{"literal exponent range", exprArgs("1e1001"), `whose exponent is out of range; use at most e±1000`, true},
		{"huge literal exponent", exprArgs("1e99999999999999999999"), `whose exponent is out of range`, true},
		{"non-integer power", exprArgs("2^0.5"), `raises to the non-integer power 1/2 at position 1; only integer exponents are supported`, true},
		{"power range", exprArgs("2^1001"), `has the exponent 1001 at position 1; exponents must be between -1000 and 1000`, true},
		{"power too large", exprArgs("10^1000^2"), `has the exponent 1000000`, true},
		{"result too large", exprArgs("1e1000^10"), `calculator: expression "1e1000^10" is too large to compute exactly at position 6: the value would need more than 8192 bits (about 2466 digits)`, false},
		{"product too large", exprArgs("1e1000*1e1000*1e1000"), `is too large to compute exactly at position 13`, true},
		{"tiny too precise", exprArgs("1e-1000*1e-1000*1e-1000"), `is too precise to compute exactly at position 15: the value's denominator would need more than 8192 bits`, true},
		{"negative power too precise", exprArgs("10^-3000"), `has the exponent -3000`, true},
		{"negative power of large base", exprArgs("1e100^-100"), `is too precise to compute exactly at position 5`, true},
		{"long literal", exprArgs(strings.Repeat("9", 3000)), `is too large to compute exactly at position 0`, true},
		{"too deep", exprArgs(strings.Repeat("(", 101) + "1" + strings.Repeat(")", 101)), `nests too deeply at position 100; the limit is 100 levels`, true},
		{"too many signs", exprArgs(strings.Repeat("-", 200) + "1"), `nests too deeply`, true},
		{"too long", exprArgs(strings.Repeat("1+", 2100) + "1"), `calculator: expression is 4201 bytes long; the limit is 4096`, false},
		{"empty", exprArgs("  "), `calculator: expression is empty; write one like "12.5 * 4"`, false},
		{"missing expression", `{}`, `calculator: argument "expression" is required, e.g. {"expression": "12.5 * 4"}`, false},
		{"empty args", ``, `argument "expression" is required`, true},
		{"expression not a string", `{"expression": 42}`, `calculator: argument "expression" must be a string`, true},
		{"unknown argument", `{"expression": "1", "precision": 3}`, `calculator: unknown argument "precision": the only argument is "expression"`, false},
		{"args not an object", `[1, 2]`, `calculator: arguments must be a JSON object, not [1, 2]`, false},
		{"args not JSON", `expression: 1+1`, `calculator: arguments must be a JSON object, not expression: 1+1`, false},
		{"args truncated", `{"expression": "1+1"`, `arguments must be a JSON object`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.Execute(context.Background(), calcSpec(""), Call{Args: json.RawMessage(tt.args)})
			require.Error(t, err)
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "code of %v", err)
			if tt.part {
				require.Contains(t, err.Error(), tt.want)
			} else {
				require.Equal(t, tt.want, err.Error())
			}
		})
	}
}

// FuzzCalculator checks that no expression panics, that every failure is
// an agent.CodeInvalid error naming the problem, and that every success
// has a well-formed result.
func FuzzCalculator(f *testing.F) {
	for _, s := range []string{
		"12.5 * 4", "1/3", "0.1 + 0.2", "2^100", "2^-3", "-2^2", "2**3**2", "(1+2)*3 - 4/5 % 6",
		"1e-30", "1e1000 * 1e-1000", ".5", "3.", "1e", "2 +", "(", ")", "()", "1/0", "0^-1", "5 % 0",
		"2^0.5", "2^1001", "1e1000^10", "sqrt(2)", "2(3)", "1,000", "6 × 7 ÷ 2 − 1", "--+-1",
		"((((((((((1))))))))))", "9999999999999999999999999999 / 7", "1e1001", "\xff", "", " ",
	} {
		f.Add(s)
	}
	calc, err := Calculator().Build(calcSpec(""), Deps{}.WithDefaults())
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, expr string) {
		args, err := json.Marshal(map[string]string{"expression": expr})
		require.NoError(t, err)
		out, err := calc.Run(context.Background(), Call{Args: args})
		if err != nil {
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "code of %v", err)
			require.NotEmpty(t, err.Error())
			return
		}
		require.NotEmpty(t, out.Text)
		var data calcResult
		require.NoError(t, json.Unmarshal(out.Data, &data))
		require.NotEmpty(t, data.Result)
		require.Equal(t, data.Exact, data.Fraction == "")
	})
}

// TestCalculatorHostileExpressionsAreCheap keeps values near the size
// limits through thousands of operations: each must still finish quickly.
// The bound is loose (they take milliseconds) so that only a blow-up fails.
func TestCalculatorHostileExpressionsAreCheap(t *testing.T) {
	huge := "(1/3^1000/7^1000/11^900)" // a denominator of about 7500 bits
	fill := func(prefix, unit string) string {
		return prefix + strings.Repeat(unit, (calcMaxExpressionBytes-len(prefix))/len(unit))
	}
	for name, expr := range map[string]string{
		"additions":     fill(huge, "+1"),
		"fractions":     fill(huge, "+1/3"),
		"cancellations": fill(huge, "*3/3"),
		"remainders":    fill(huge, "%1"),
		"big remainder": fill("3^1000*7^1000*11^900", "%2"),
		"signs":         fill("1", "-(-1)"),
	} {
		t.Run(name, func(t *testing.T) {
			require.LessOrEqual(t, len(expr), calcMaxExpressionBytes)
			start := time.Now()
			_, err := evaluate(expr)
			require.NoError(t, err)
			require.Less(t, time.Since(start), 5*time.Second)
		})
	}
}
