package core

import "fmt"

// FieldError names the configuration field a machine's New or an engine's Open refused, the
// value it was given and the rule it broke. Err is the refusing package's sentinel, which
// errors.Is finds; callers that present the field in their own terms (the public API names
// Config.Policy.Attempts, not Attempts) read Field, Value and Rule.
type FieldError struct {
	Err   error
	Field string
	Value any
	Rule  string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%v: %s = %v: %s", e.Err, e.Field, e.Value, e.Rule)
}

func (e *FieldError) Unwrap() error { return e.Err }
