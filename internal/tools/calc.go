package tools

import (
	"fmt"
	"math/big"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/words"
)

// evaluate parses and evaluates an arithmetic expression (syntax: see
// Calculator). The grammar, evaluated while it is parsed:
//
//	expr    = term { ("+" | "-") term }
//	term    = unary { ("*" | "/" | "%") unary }
//	unary   = ("+" | "-") unary | power
//	power   = primary [ "^" unary ]
//	primary = number | "(" expr ")"
func evaluate(expr string) (*big.Rat, error) {
	if len(expr) > calcMaxExpressionBytes {
		return nil, agent.Errorf(agent.CodeInvalid, "expression is %d bytes long; the limit is %d", len(expr), calcMaxExpressionBytes)
	}
	if strings.TrimSpace(expr) == "" {
		return nil, agent.Errorf(agent.CodeInvalid, `expression is empty; write one like "12.5 * 4"`)
	}
	p := &calcParser{src: expr}
	v, err := p.expr()
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos < len(p.src) {
		r, _ := utf8.DecodeRuneInString(p.src[p.pos:])
		switch {
		case r == ')':
			return nil, p.errorf("has an unmatched \")\" at position %d", p.runePos(p.pos))
		case r == '(' || isDigit(r) || r == '.':
			return nil, p.errorf("has %q at position %d where an operator is expected; write * for multiplication", string(r), p.runePos(p.pos))
		default:
			return nil, p.unexpected()
		}
	}
	return v, nil
}

type calcParser struct {
	src   string
	pos   int // byte offset of the next unread character
	depth int
}

// errorf returns an agent.CodeInvalid error about the expression; msg
// continues `expression "…" `.
func (p *calcParser) errorf(format string, args ...any) error {
	return agent.Errorf(agent.CodeInvalid, "expression %q %s", p.src, fmt.Sprintf(format, args...))
}

// runePos converts a byte offset to the character position users see.
func (p *calcParser) runePos(off int) int { return utf8.RuneCountInString(p.src[:off]) }

func (p *calcParser) skipSpace() {
	for p.pos < len(p.src) {
		r, n := utf8.DecodeRuneInString(p.src[p.pos:])
		if !unicode.IsSpace(r) {
			return
		}
		p.pos += n
	}
}

// peekOp returns the operator at the current position (normalised to its
// ASCII form) and its length in bytes, or 0.
func (p *calcParser) peekOp() (op rune, n int) {
	p.skipSpace()
	if strings.HasPrefix(p.src[p.pos:], "**") {
		return '^', 2
	}
	r, n := utf8.DecodeRuneInString(p.src[p.pos:])
	switch r {
	case '+', '-', '*', '/', '%', '^':
		return r, n
	case '−':
		return '-', n
	case '×':
		return '*', n
	case '÷':
		return '/', n
	}
	return 0, 0
}

func (p *calcParser) enter() error {
	p.depth++
	if p.depth > calcMaxDepth {
		return p.errorf("nests too deeply at position %d; the limit is %d levels", p.runePos(p.pos), calcMaxDepth)
	}
	return nil
}

func (p *calcParser) expr() (*big.Rat, error) {
	x, err := p.term()
	if err != nil {
		return nil, err
	}
	for {
		op, n := p.peekOp()
		if op != '+' && op != '-' {
			return x, nil
		}
		at := p.pos
		p.pos += n
		y, err := p.term()
		if err != nil {
			return nil, err
		}
		if op == '+' {
			x = new(big.Rat).Add(x, y)
		} else {
			x = new(big.Rat).Sub(x, y)
		}
		if err := p.checkSize(x, at); err != nil {
			return nil, err
		}
	}
}

func (p *calcParser) term() (*big.Rat, error) {
	x, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		op, n := p.peekOp()
		if op != '*' && op != '/' && op != '%' {
			return x, nil
		}
		at := p.pos
		p.pos += n
		y, err := p.unary()
		if err != nil {
			return nil, err
		}
		switch op {
		case '*':
			x = new(big.Rat).Mul(x, y)
		case '/':
			if y.Sign() == 0 {
				return nil, p.errorf("divides by zero at position %d", p.runePos(at))
			}
			x = new(big.Rat).Quo(x, y)
		case '%':
			if y.Sign() == 0 {
				return nil, p.errorf("takes a remainder of division by zero at position %d", p.runePos(at))
			}
			x = remainder(x, y)
		}
		if err := p.checkSize(x, at); err != nil {
			return nil, err
		}
	}
}

// remainder returns x - y*trunc(x/y): its sign follows x, as Go's %.
func remainder(x, y *big.Rat) *big.Rat {
	q := new(big.Rat).Quo(x, y)
	t := new(big.Int).Quo(q.Num(), q.Denom()) // truncates toward zero
	prod := new(big.Rat).Mul(y, new(big.Rat).SetInt(t))
	return prod.Sub(x, prod)
}

func (p *calcParser) unary() (*big.Rat, error) {
	op, n := p.peekOp()
	if op != '+' && op != '-' {
		return p.power()
	}
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	p.pos += n
	x, err := p.unary()
	if err != nil {
		return nil, err
	}
	if op == '-' {
		x = new(big.Rat).Neg(x)
	}
	return x, nil
}

func (p *calcParser) power() (*big.Rat, error) {
	x, err := p.primary()
	if err != nil {
		return nil, err
	}
	op, n := p.peekOp()
	if op != '^' {
		return x, nil
	}
	at := p.pos
	p.pos += n
	// The exponent is a unary so that 2^-1 works; through unary → power it
	// also makes ^ right-associative.
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	y, err := p.unary()
	if err != nil {
		return nil, err
	}
	return p.pow(x, y, at)
}

func (p *calcParser) pow(x, y *big.Rat, at int) (*big.Rat, error) {
	if !y.IsInt() {
		return nil, p.errorf("raises to the non-integer power %s at position %d; only integer exponents are supported", y.RatString(), p.runePos(at))
	}
	e := y.Num()
	if e.CmpAbs(big.NewInt(calcMaxExponent)) > 0 {
		return nil, p.errorf("has the exponent %s at position %d; exponents must be between -%d and %d", words.Clip(e.String(), 40), p.runePos(at), calcMaxExponent, calcMaxExponent)
	}
	k := e.Int64()
	if k < 0 && x.Sign() == 0 {
		return nil, p.errorf("divides by zero at position %d (zero to a negative power)", p.runePos(at))
	}
	absK := max(k, -k)
	// A b-bit number to the power k has at most b*k bits: refuse before
	// computing rather than after.
	numBits, denBits := int64(x.Num().BitLen())*absK, int64(x.Denom().BitLen())*absK
	if k < 0 {
		numBits, denBits = denBits, numBits
	}
	if err := p.sizeError(numBits, denBits, at); err != nil {
		return nil, err
	}
	num := new(big.Int).Exp(x.Num(), big.NewInt(absK), nil)
	den := new(big.Int).Exp(x.Denom(), big.NewInt(absK), nil)
	if k < 0 {
		num, den = den, num
	}
	return new(big.Rat).SetFrac(num, den), nil
}

func (p *calcParser) primary() (*big.Rat, error) {
	p.skipSpace()
	if p.pos >= len(p.src) {
		return nil, p.errorf("is incomplete at position %d: a number or \"(\" is missing", p.runePos(p.pos))
	}
	r, n := utf8.DecodeRuneInString(p.src[p.pos:])
	switch {
	case r == '(':
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer func() { p.depth-- }()
		open := p.pos
		p.pos += n
		x, err := p.expr()
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.pos >= len(p.src) {
			return nil, p.errorf("is incomplete at position %d: the \"(\" at position %d is not closed", p.runePos(p.pos), p.runePos(open))
		}
		if p.src[p.pos] != ')' {
			r, _ := utf8.DecodeRuneInString(p.src[p.pos:])
			if r == '(' || isDigit(r) || r == '.' {
				return nil, p.errorf("has %q at position %d where an operator or \")\" is expected; write * for multiplication", string(r), p.runePos(p.pos))
			}
			return nil, p.unexpected()
		}
		p.pos++
		return x, nil
	case isDigit(r) || r == '.':
		return p.number()
	case r == ')':
		return nil, p.errorf("has \")\" at position %d where a number is expected", p.runePos(p.pos))
	case unicode.IsLetter(r) || r == '_':
		start := p.pos
		end := start
		for end < len(p.src) {
			r, n := utf8.DecodeRuneInString(p.src[end:])
			if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' {
				break
			}
			end += n
		}
		return nil, p.errorf("has the name %q at position %d; functions, variables and constants are not supported, only numbers, + - * / %% ^ and parentheses", words.Clip(p.src[start:end], 40), p.runePos(start))
	}
	if op, _ := p.peekOp(); op != 0 {
		return nil, p.errorf("has %q at position %d where a number is expected", string(r), p.runePos(p.pos))
	}
	return nil, p.unexpected()
}

// unexpected reports the character at the current position.
func (p *calcParser) unexpected() error {
	r, _ := utf8.DecodeRuneInString(p.src[p.pos:])
	hint := "only numbers, + - * / % ^ and parentheses are allowed"
	if r == ',' {
		hint = "write numbers without thousands separators and with \".\" as the decimal point"
	}
	return p.errorf("has an unexpected %q at position %d; %s", string(r), p.runePos(p.pos), hint)
}

// number reads a decimal literal: digits [ "." digits ] [ e [+-] digits ],
// where one of the two digit runs of the mantissa may be empty.
func (p *calcParser) number() (*big.Rat, error) {
	start := p.pos
	s := p.src
	i := p.pos
	for i < len(s) && isDigit(rune(s[i])) {
		i++
	}
	intDigits := s[start:i]
	var fracDigits string
	if i < len(s) && s[i] == '.' {
		i++
		j := i
		for i < len(s) && isDigit(rune(s[i])) {
			i++
		}
		fracDigits = s[j:i]
	}
	if intDigits == "" && fracDigits == "" {
		return nil, p.errorf("has \".\" without digits at position %d", p.runePos(start))
	}
	exp := 0
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		neg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			neg = s[i] == '-'
			i++
		}
		j := i
		for i < len(s) && isDigit(rune(s[i])) {
			if exp <= calcMaxExponent {
				exp = exp*10 + int(s[i]-'0')
			}
			i++
		}
		if i == j {
			return nil, p.errorf("has a number with an incomplete exponent at position %d; write it like 1e3 or 2.5e-4", p.runePos(start))
		}
		if exp > calcMaxExponent {
			return nil, p.errorf("has a number at position %d whose exponent is out of range; use at most e±%d", p.runePos(start), calcMaxExponent)
		}
		if neg {
			exp = -exp
		}
	}
	p.pos = i

	mant, _ := new(big.Int).SetString(intDigits+fracDigits, 10)
	den := pow10(len(fracDigits))
	if exp > 0 {
		mant.Mul(mant, pow10(exp))
	} else {
		den.Mul(den, pow10(-exp))
	}
	x := new(big.Rat).SetFrac(mant, den)
	if err := p.checkSize(x, start); err != nil {
		return nil, err
	}
	return x, nil
}

func (p *calcParser) checkSize(x *big.Rat, at int) error {
	return p.sizeError(int64(x.Num().BitLen()), int64(x.Denom().BitLen()), at)
}

// sizeError reports a value whose numerator or denominator needs more than
// calcMaxBits bits.
func (p *calcParser) sizeError(numBits, denBits int64, at int) error {
	const digits = calcMaxBits * 30103 / 100000 // log10(2) ≈ 0.30103
	switch {
	case numBits > calcMaxBits:
		return p.errorf("is too large to compute exactly at position %d: the value would need more than %d bits (about %d digits)", p.runePos(at), calcMaxBits, digits)
	case denBits > calcMaxBits:
		return p.errorf("is too precise to compute exactly at position %d: the value's denominator would need more than %d bits (about %d digits)", p.runePos(at), calcMaxBits, digits)
	}
	return nil
}

func isDigit(r rune) bool { return '0' <= r && r <= '9' }
