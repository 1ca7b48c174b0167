package jobstate

import (
	"errors"
	"fmt"
)

// Errors of the job state machine. Every method wraps them with context; test with errors.Is.
var (
	// ErrInvalid: the command's arguments are malformed (a bug in the caller or bad client input).
	ErrInvalid = errors.New("jobstate: invalid argument")
	// ErrStaleLease: the token is not the current, live lease. The sender's work no longer counts and
	// it must stop; this is how a crashed or slow worker's late result is ignored.
	ErrStaleLease = errors.New("jobstate: stale lease")
	// ErrNotClaimable: the job has no attempt to hand out now (running under a live lease, or waiting out
	// a retry backoff).
	ErrNotClaimable = errors.New("jobstate: job not claimable")
	// ErrDeadlineExceeded: the job's deadline has passed; Tick will fail it.
	ErrDeadlineExceeded = errors.New("jobstate: deadline exceeded")
	// ErrTerminal: the job already ended; only exact repeats of the command that ended it are accepted.
	ErrTerminal = errors.New("jobstate: job already ended")
	// ErrIdempotencyConflict: the Idempotency-Key was used with different inputs or options (HTTP 409).
	ErrIdempotencyConflict = errors.New("jobstate: idempotency key reused with different inputs")
)

// StaleLeaseError is returned when a command carries a token that does not hold the job's live lease. It
// matches ErrStaleLease with errors.Is, and tells the worker (and the logs) why.
type StaleLeaseError struct {
	Token   Token // the token the command carried
	Current Token // the token of the live lease; 0 when no lease is held
	Expired bool  // the token is the current one but its lease has run out
}

func (e *StaleLeaseError) Error() string {
	switch {
	case e.Expired:
		return fmt.Sprintf("jobstate: lease %d expired", e.Token)
	case e.Current == 0:
		return fmt.Sprintf("jobstate: stale lease %d (no lease is held)", e.Token)
	default:
		return fmt.Sprintf("jobstate: stale lease %d (current lease is %d)", e.Token, e.Current)
	}
}

// Is makes errors.Is(err, ErrStaleLease) true.
func (e *StaleLeaseError) Is(target error) bool { return target == ErrStaleLease }
