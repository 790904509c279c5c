package netidle

import (
	"net"
	"os"
)

// ErrIdle is the error of a Read or Write (and of the other I/O methods) on
// a conn of [Conn], [Listener] or a [Policy] after the hierarchy closed it
// for being idle, or after [OnReadIdle]'s function closed it with Close. It
// comes wrapped in a [*net.OpError] that names the operation and the
// addresses; test for it with errors.Is. errors.Is(err,
// os.ErrDeadlineExceeded) holds too, and the error is a [net.Error] whose
// Timeout() is true: the error a reader already checks for when it sets its
// own read deadline.
var ErrIdle error = &idleError{"netidle: connection closed for being idle"}

// ErrLifetime is as [ErrIdle], for a conn closed at the end of its
// [MaxLifetime].
var ErrLifetime error = &idleError{"netidle: connection closed at the end of its lifetime"}

// idleError is the type of ErrIdle and ErrLifetime.
type idleError struct{ msg string }

func (e *idleError) Error() string { return e.msg }

// Timeout reports true: the close is a timeout, as a passed deadline is.
func (e *idleError) Timeout() bool { return true }

// Temporary reports true, as os.ErrDeadlineExceeded's does.
func (e *idleError) Temporary() bool { return true }

// Unwrap returns os.ErrDeadlineExceeded, so that errors.Is finds it.
func (e *idleError) Unwrap() error { return os.ErrDeadlineExceeded }

var _ net.Error = (*idleError)(nil)

// closedError is the error of op on c (the wrapped conn) after the
// hierarchy closed it for why (ErrIdle or ErrLifetime).
func closedError(c net.Conn, op string, why error) error {
	e := &net.OpError{Op: op, Err: why}
	if a := c.LocalAddr(); a != nil {
		e.Net, e.Source = a.Network(), a
	}
	if a := c.RemoteAddr(); a != nil {
		e.Addr = a
	}
	return e
}
