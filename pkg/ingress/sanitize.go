package ingress

import (
	"errors"
	"io"
	"net"
)

// bodyError words a failure to read a request body for the client. A network error's
// text names the connection's addresses ("read tcp 10.0.0.5:8080->…: i/o timeout"), so
// it becomes stable words; other errors (multipart framing) are the client's own
// doing and are shown as they are.
func bodyError(err error) string {
	var ne net.Error
	var op *net.OpError
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "the body did not arrive in time"
	case errors.As(err, &op):
		return "the connection failed while the body was read"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the body ended early"
	}
	return err.Error()
}
