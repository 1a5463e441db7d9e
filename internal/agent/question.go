package agent

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// KindAskUser is the tool kind with which the model asks a person a
// question and waits for the answer: the turn holds the call (as it holds
// one waiting for approval) until an answer, its timeout or the turn's
// cancellation, and the answer is the call's result.
const KindAskUser = "ask_user"

// Bounds of a question and its answer.
const (
	MaxQuestionBytes = 4 << 10
	MaxChoices       = 20
	MaxChoiceBytes   = 200
	MaxAnswerBytes   = 8 << 10
)

// Outcomes of a question, as ApprovalRecord.Outcome and tool-call
// statuses: answered, or ApprovalTimedOut or ApprovalCanceled.
const QuestionAnswered = "answered"

// AskUserConfig is an ask_user tool's catalog config.
type AskUserConfig struct {
	// Role is the role a token needs to answer (default "user": anyone
	// of the tenant who may talk to its agents). "approver" keeps the
	// answers to reviewers, as their decisions are.
	Role string `json:"role,omitempty"`
	// TimeoutSec bounds the wait for an answer; default: the agent's
	// approval timeout.
	TimeoutSec int `json:"timeout_sec,omitempty"`
}

// AskUserConfigSchema is the JSON Schema of AskUserConfig, as the catalog
// publishes it.
const AskUserConfigSchema = `{"type":"object","additionalProperties":false,"properties":{` +
	`"role":{"type":"string","minLength":1,"maxLength":64,"pattern":"^[a-z][a-z0-9_-]*$","description":"the role a token needs to answer (default user)"},` +
	`"timeout_sec":{"type":"integer","minimum":1,"maximum":2592000,"description":"how long the turn waits for an answer (default: the agent's approval timeout)"}}}`

// DefaultAnswerRole is the role that may answer when the config names none.
const DefaultAnswerRole = "user"

// ParseAskUserConfig reads and checks an ask_user config, with the
// defaults filled in (TimeoutSec stays 0: the agent's approval timeout).
func ParseAskUserConfig(raw json.RawMessage) (AskUserConfig, error) {
	var cfg AskUserConfig
	if raw = bytes.TrimSpace(raw); len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		if err := decodeStrict(raw, &cfg); err != nil {
			return AskUserConfig{}, Errorf(CodeInvalid, "%s config: %v (the settings are \"role\" and \"timeout_sec\")", KindAskUser, err)
		}
	}
	cfg.Role = cmp.Or(cfg.Role, DefaultAnswerRole)
	if !ValidRole(cfg.Role) {
		return AskUserConfig{}, Errorf(CodeInvalid, "%s config: role %q: want a lowercase letter, then lowercase letters, digits, '_' or '-', at most 64 bytes", KindAskUser, cfg.Role)
	}
	if cfg.TimeoutSec < 0 || cfg.TimeoutSec > 30*24*3600 {
		return AskUserConfig{}, Errorf(CodeInvalid, "%s config: timeout_sec is %d; want 1 to %d (30 days)", KindAskUser, cfg.TimeoutSec, 30*24*3600)
	}
	return cfg, nil
}

// AskUserParameters is the JSON Schema of an ask_user call's arguments.
const AskUserParameters = `{"type":"object","additionalProperties":false,"required":["question"],"properties":{` +
	`"question":{"type":"string","minLength":1,"maxLength":4096,"description":"the question, complete and short: the person sees nothing else"},` +
	`"choices":{"type":"array","maxItems":20,"uniqueItems":true,"items":{"type":"string","minLength":1,"maxLength":200},` +
	`"description":"answers to pick from, when there are a few; leave out for a free-text answer"},` +
	`"allow_other":{"type":"boolean","description":"with choices: the person may also answer in their own words"}}}`

// AskUserArgs are an ask_user call's arguments.
type AskUserArgs struct {
	Question   string   `json:"question"`
	Choices    []string `json:"choices,omitempty"`
	AllowOther bool     `json:"allow_other,omitempty"`
}

// ParseAskUserArgs reads and checks a call's arguments; errors are
// CodeInvalid, for the model to read.
func ParseAskUserArgs(raw string) (AskUserArgs, error) {
	var a AskUserArgs
	if err := decodeStrict([]byte(raw), &a); err != nil {
		return AskUserArgs{}, Errorf(CodeInvalid, "%s arguments: %v (want {\"question\", \"choices\"?, \"allow_other\"?})", KindAskUser, err)
	}
	a.Question = strings.TrimSpace(a.Question)
	switch {
	case a.Question == "":
		return AskUserArgs{}, Errorf(CodeInvalid, "%s arguments: question is required", KindAskUser)
	case len(a.Question) > MaxQuestionBytes:
		return AskUserArgs{}, Errorf(CodeInvalid, "%s arguments: question is %d bytes; the limit is %d", KindAskUser, len(a.Question), MaxQuestionBytes)
	case len(a.Choices) > MaxChoices:
		return AskUserArgs{}, Errorf(CodeInvalid, "%s arguments: %d choices; the limit is %d", KindAskUser, len(a.Choices), MaxChoices)
	case a.AllowOther && len(a.Choices) == 0:
		return AskUserArgs{}, Errorf(CodeInvalid, "%s arguments: allow_other needs choices (without them any answer is allowed)", KindAskUser)
	}
	for i, c := range a.Choices {
		switch {
		case strings.TrimSpace(c) == "":
			return AskUserArgs{}, Errorf(CodeInvalid, "%s arguments: choices[%d] is empty", KindAskUser, i)
		case len(c) > MaxChoiceBytes:
			return AskUserArgs{}, Errorf(CodeInvalid, "%s arguments: choices[%d] is %d bytes; the limit is %d", KindAskUser, i, len(c), MaxChoiceBytes)
		case slices.Contains(a.Choices[:i], c):
			return AskUserArgs{}, Errorf(CodeInvalid, "%s arguments: choice %q is listed twice", KindAskUser, c)
		}
	}
	return a, nil
}

// PendingQuestion is an ask_user call waiting for an answer.
type PendingQuestion struct {
	CallID     string    `json:"call_id"`
	Tool       string    `json:"tool"`
	Question   string    `json:"question"`
	Choices    []string  `json:"choices,omitempty"`
	AllowOther bool      `json:"allow_other,omitempty"`
	Role       string    `json:"role"` // the role a token needs to answer
	AskedAt    time.Time `json:"asked_at"`
	Deadline   time.Time `json:"deadline"`
}

// Answer is a person's answer to a question: the payload of a turn's
// "answer" signal and update.
type Answer struct {
	CallID string `json:"call_id"`
	Text   string `json:"answer"`
	// Answerer is who answered; Roles are their roles. Channels set both
	// from the caller's credential, never from a request body; an
	// operator signalling the workflow states them.
	Answerer string   `json:"answerer"`
	Roles    []string `json:"roles,omitempty"`
	// AnswererIssuer and AnswererSubject say where the answerer's
	// identity comes from (Caller.Issuer, Caller.Subject), for the
	// record; empty for an operator's answer.
	AnswererIssuer  string `json:"answerer_issuer,omitempty"`
	AnswererSubject string `json:"answerer_subject,omitempty"`
}

// Validate checks the answer's shape (whether the question waits is the
// turn's business).
func (a Answer) Validate() error {
	switch {
	case strings.TrimSpace(a.CallID) == "":
		return Errorf(CodeInvalid, "call_id is required")
	case len(a.CallID) > MaxKeyLength:
		return Errorf(CodeInvalid, "call_id is longer than %d bytes", MaxKeyLength)
	case strings.TrimSpace(a.Text) == "":
		return Errorf(CodeInvalid, "answer is required")
	case len(a.Text) > MaxAnswerBytes:
		return Errorf(CodeInvalid, "answer is %d bytes; the limit is %d", len(a.Text), MaxAnswerBytes)
	case !utf8.ValidString(a.Text):
		return Errorf(CodeInvalid, "answer is not valid UTF-8")
	case strings.TrimSpace(a.Answerer) == "":
		return Errorf(CodeInvalid, "answerer is required: who answered")
	case len(a.Answerer) > MaxKeyLength:
		return Errorf(CodeInvalid, "answerer is longer than %d bytes", MaxKeyLength)
	case len(a.Roles) > 32:
		return Errorf(CodeInvalid, "roles: %d; the limit is 32", len(a.Roles))
	case len(a.AnswererIssuer) > MaxIssuerLength || len(a.AnswererSubject) > MaxSubjectLength:
		return Errorf(CodeInvalid, "answerer_issuer or answerer_subject is too long")
	}
	return nil
}

// Fits refuses an answer the question does not take: from someone
// without the question's role, or not one of its choices when it has
// choices and allows no other answer.
func (q PendingQuestion) Fits(a Answer) error {
	if q.Role != "" && !slices.Contains(a.Roles, q.Role) {
		return Errorf(CodePermissionDenied, "answering call %q needs the role %s; %s has %s", q.CallID, q.Role, a.Answerer, roleNames(a.Roles))
	}
	if len(q.Choices) > 0 && !q.AllowOther && !slices.Contains(q.Choices, a.Text) {
		return Errorf(CodeInvalid, "the answer must be one of the choices: %s", quoteAll(q.Choices))
	}
	return nil
}

func roleNames(roles []string) string {
	if len(roles) == 0 {
		return "no role"
	}
	return "the roles " + strings.Join(roles, ", ")
}

func quoteAll(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}

// QuestionEvent is the payload of question and question_answered events.
type QuestionEvent struct {
	// On question: what is asked, and who may answer.
	Text       string   `json:"text,omitempty"`
	Choices    []string `json:"choices,omitempty"`
	AllowOther bool     `json:"allow_other,omitempty"`
	Role       string   `json:"role,omitempty"`
	// On question_answered: answered, timed_out or canceled; who answered
	// and how (signal, update, timeout, cancel). The answer itself is the
	// call's result (its tool_end).
	Outcome  string `json:"outcome,omitempty"`
	Answerer string `json:"answerer,omitempty"`
	Via      string `json:"via,omitempty"`
}

func (q *QuestionEvent) validate(kind EventKind) error {
	switch kind {
	case EventQuestion:
		if strings.TrimSpace(q.Text) == "" || q.Outcome != "" || q.Answerer != "" || q.Via != "" {
			return Errorf(CodeInvalid, "question event: question needs text and role, and no outcome")
		}
		if len(q.Text) > MaxQuestionBytes || len(q.Choices) > MaxChoices {
			return Errorf(CodeInvalid, "question event: the question is over its bounds")
		}
		if q.Role == "" {
			return Errorf(CodeInvalid, "question event: question.role is required")
		}
	case EventQuestionAnswered:
		if q.Text != "" || len(q.Choices) > 0 || q.AllowOther || q.Role != "" {
			return Errorf(CodeInvalid, "question_answered event: question has outcome, answerer and via only")
		}
		switch q.Outcome {
		case QuestionAnswered, ApprovalTimedOut, ApprovalCanceled:
		default:
			return Errorf(CodeInvalid, "question_answered event: outcome %q is unknown (answered, timed_out, canceled)", q.Outcome)
		}
		switch q.Via {
		case ViaSignal, ViaUpdate, ViaTimeout, ViaCancel:
		default:
			return Errorf(CodeInvalid, "question_answered event: via %q is unknown", q.Via)
		}
		if len(q.Answerer) > MaxKeyLength {
			return Errorf(CodeInvalid, "question_answered event: answerer is longer than %d bytes", MaxKeyLength)
		}
	}
	return nil
}
