// Package rollout moves a worker deployment's new turns to a build in
// steps (10 → 50 → 100 % by default), and rolls the build back by itself
// when the turns it finished regress against those of the current build:
// their error rate, their guardrail trips, their tokens per turn. It
// reads the builds' signals from the results they stored (store.
// BuildSignals) and drives Temporal's Worker Deployment Versioning: a
// step ramps the build to its percentage; the last makes it current.
// Turns already running stay on the build that started them (AgentTurn
// is Pinned): a rollback only sends new turns back.
//
// It must not import the workflows or the gateway: it is the operator's
// tool, run by `starter deploy rollout`.
package rollout

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/store"
)

// Thresholds say how much worse than the current build the ramped build
// may do before it is rolled back. Rates are absolute (0.05: five
// percentage points more of the turns); TokensRise is relative (0.25:
// a quarter more tokens a turn).
type Thresholds struct {
	ErrorRateRise float64
	GuardRateRise float64
	TokensRise    float64
}

// DefaultThresholds are a rollout's unless it sets its own.
var DefaultThresholds = Thresholds{ErrorRateRise: 0.05, GuardRateRise: 0.05, TokensRise: 0.25}

// Regression is a signal on which the build did worse than allowed.
type Regression struct {
	Signal    string  `json:"signal"`
	Build     float64 `json:"build"`
	Current   float64 `json:"current"`
	Allowed   float64 `json:"allowed"`
	Described string  `json:"described"`
}

// Compare says on which signals build did worse than current by more
// than t allows.
func Compare(build, current store.BuildSignals, t Thresholds) []Regression {
	var out []Regression
	check := func(signal string, b, c, allowed float64, format string) {
		if b > allowed {
			out = append(out, Regression{Signal: signal, Build: b, Current: c, Allowed: allowed,
				Described: fmt.Sprintf(format, b, c, allowed)})
		}
	}
	check("error_rate", build.ErrorRate(), current.ErrorRate(), current.ErrorRate()+t.ErrorRateRise,
		"error rate %.3f against the current build's %.3f (at most %.3f)")
	check("guard_rate", build.GuardRate(), current.GuardRate(), current.GuardRate()+t.GuardRateRise,
		"guardrail trips %.3f a turn against the current build's %.3f (at most %.3f)")
	if current.Turns > 0 && current.TokensPerTurn() > 0 {
		check("tokens_per_turn", build.TokensPerTurn(), current.TokensPerTurn(), current.TokensPerTurn()*(1+t.TokensRise),
			"%.0f tokens a turn against the current build's %.0f (at most %.0f)")
	}
	return out
}

// Deployment is the worker deployment a rollout drives.
type Deployment interface {
	// Current is the build new turns go to, "" when none is.
	Current(ctx context.Context) (string, error)
	Ramp(ctx context.Context, build string, percent int) error
	Unramp(ctx context.Context, build string) error
	SetCurrent(ctx context.Context, build string) error
}

// Signals reads a build's signals since a time (store.Store).
type Signals interface {
	BuildSignals(ctx context.Context, build string, since time.Time) (store.BuildSignals, error)
}

// Options are one rollout's.
type Options struct {
	// Deployment is the worker deployment's name; Build the build to
	// roll out (builds are named "deployment:build" in the signals).
	Deployment, Build string
	// Steps are the percentages of new turns the build takes, in order;
	// 100 makes it current. Default 10, 50, 100.
	Steps []int
	// Hold is how long each step lasts before it is judged; MinTurns how
	// many turns the build must have finished in the step to be judged
	// (it waits for them up to MaxWait, then rolls back: a build no
	// traffic reached is not proven).
	Hold     time.Duration
	MinTurns int
	MaxWait  time.Duration
	// Poll is how often the signals are read while a step waits.
	Poll       time.Duration
	Thresholds Thresholds
}

func (o *Options) defaults() error {
	if o.Deployment == "" || o.Build == "" {
		return fmt.Errorf("rollout: a deployment and a build are required")
	}
	if len(o.Steps) == 0 {
		o.Steps = []int{10, 50, 100}
	}
	last := 0
	for _, p := range o.Steps {
		if p <= last || p > 100 {
			return fmt.Errorf("rollout: steps %v: want percentages that grow, each at most 100", o.Steps)
		}
		last = p
	}
	if last != 100 {
		o.Steps = append(o.Steps, 100)
	}
	if o.Hold <= 0 {
		o.Hold = 5 * time.Minute
	}
	if o.MinTurns <= 0 {
		o.MinTurns = 20
	}
	if o.MaxWait < o.Hold {
		o.MaxWait = 6 * o.Hold
	}
	if o.Poll <= 0 {
		o.Poll = min(o.Hold, 10*time.Second)
	}
	if o.Thresholds == (Thresholds{}) {
		o.Thresholds = DefaultThresholds
	}
	return nil
}

// Step is how one step went.
type Step struct {
	Percent     int                `json:"percent"`
	Build       store.BuildSignals `json:"build"`
	Current     store.BuildSignals `json:"current"`
	Regressions []Regression       `json:"regressions,omitempty"`
}

// Report is how a rollout went: its steps, and whether the build is
// current at the end (Done) or was rolled back (the last step's
// regressions, or Reason, say why).
type Report struct {
	Build    string `json:"build"`
	Previous string `json:"previous"`
	Steps    []Step `json:"steps"`
	Done     bool   `json:"done"`
	Reason   string `json:"reason,omitempty"`
}

// Markdown is the report as a person reads it.
func (r Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Rollout of %s (current was %s)\n\n", r.Build, orNone(r.Previous))
	b.WriteString("| step | build turns | failed | guard trips | tokens/turn | current turns | failed | guard trips | tokens/turn |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range r.Steps {
		fmt.Fprintf(&b, "| %d %% | %d | %d | %d | %.0f | %d | %d | %d | %.0f |\n", s.Percent,
			s.Build.Turns, s.Build.Failed, s.Build.GuardTrips, s.Build.TokensPerTurn(),
			s.Current.Turns, s.Current.Failed, s.Current.GuardTrips, s.Current.TokensPerTurn())
	}
	switch {
	case r.Done:
		fmt.Fprintf(&b, "\n%s is current.\n", r.Build)
	default:
		fmt.Fprintf(&b, "\nRolled back: new turns go to %s again. %s\n", orNone(r.Previous), r.Reason)
		for _, s := range r.Steps {
			for _, g := range s.Regressions {
				fmt.Fprintf(&b, "- at %d %%: %s\n", s.Percent, g.Described)
			}
		}
	}
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "unversioned workers"
	}
	return s
}

// Run rolls the build out step by step, and back when it regresses. The
// report says how it went; an error is a rollout that could not be
// driven (the server refused a step), after which the build is unramped
// if it could be.
func Run(ctx context.Context, d Deployment, sig Signals, o Options, log *zap.Logger) (Report, error) {
	if err := o.defaults(); err != nil {
		return Report{}, err
	}
	previous, err := d.Current(ctx)
	if err != nil {
		return Report{}, fmt.Errorf("rollout: read the current build: %w", err)
	}
	rep := Report{Build: o.Build, Previous: previous}
	if previous == o.Build {
		rep.Done = true
		return rep, nil
	}
	full, prev := o.Deployment+":"+o.Build, ""
	if previous != "" {
		prev = o.Deployment + ":" + previous
	}
	rollback := func(reason string) (Report, error) {
		rep.Reason = reason
		log.Warn("rollout rolled back", zap.String("build", o.Build), zap.String("reason", reason))
		if err := d.Unramp(context.WithoutCancel(ctx), o.Build); err != nil {
			return rep, fmt.Errorf("rollout: roll back %s: %w", o.Build, err)
		}
		return rep, nil
	}
	for _, pct := range o.Steps {
		if pct == 100 {
			if err := d.SetCurrent(ctx, o.Build); err != nil {
				return rollback(fmt.Sprintf("the server did not make it current: %v", err))
			}
			log.Info("rollout done", zap.String("build", o.Build))
			rep.Done = true
			return rep, nil
		}
		if err := d.Ramp(ctx, o.Build, pct); err != nil {
			return rollback(fmt.Sprintf("the server did not ramp it to %d %%: %v", pct, err))
		}
		log.Info("rollout step", zap.String("build", o.Build), zap.Int("percent", pct))
		step, err := judge(ctx, sig, o, full, prev, pct)
		rep.Steps = append(rep.Steps, step)
		switch {
		case err != nil:
			return rollback(err.Error())
		case len(step.Regressions) > 0:
			return rollback(fmt.Sprintf("it regressed at %d %%", pct))
		}
	}
	return rep, nil
}

// judge waits out a step and compares the build's turns in it with the
// current build's.
func judge(ctx context.Context, sig Signals, o Options, build, current string, pct int) (Step, error) {
	step := Step{Percent: pct}
	began := time.Now()
	for {
		wait := time.NewTimer(o.Poll)
		select {
		case <-ctx.Done():
			wait.Stop()
			return step, fmt.Errorf("the rollout was stopped at %d %%", pct)
		case <-wait.C:
		}
		var err error
		if step.Build, err = sig.BuildSignals(ctx, build, began); err != nil {
			return step, fmt.Errorf("read the build's signals: %w", err)
		}
		if current != "" {
			if step.Current, err = sig.BuildSignals(ctx, current, began); err != nil {
				return step, fmt.Errorf("read the current build's signals: %w", err)
			}
		}
		waited := time.Since(began)
		if step.Build.Turns >= o.MinTurns {
			// A regression ends the step as soon as enough turns show
			// it; a build that holds up is judged at the hold's end.
			step.Regressions = Compare(step.Build, step.Current, o.Thresholds)
			if len(step.Regressions) > 0 || waited >= o.Hold {
				return step, nil
			}
		}
		if waited >= o.MaxWait {
			return step, fmt.Errorf("the build finished %d turns at %d %% in %s, fewer than the %d a step is judged on",
				step.Build.Turns, pct, o.MaxWait, o.MinTurns)
		}
	}
}
