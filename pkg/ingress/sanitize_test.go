package ingress

import (
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
)

// A body that fails to arrive is described without the connection's addresses.
func TestBodyErrorNamesNoAddress(t *testing.T) {
	t.Parallel()
	src := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 8080}
	for _, err := range []error{
		&net.OpError{Op: "read", Net: "tcp", Source: src, Addr: src, Err: os.ErrDeadlineExceeded},
		&net.OpError{Op: "read", Net: "tcp", Source: src, Addr: src, Err: errors.New("connection reset by peer")},
		io.ErrUnexpectedEOF,
	} {
		if got := bodyError(err); strings.Contains(got, "10.0.0.5") || strings.Contains(got, "tcp") {
			t.Errorf("%v → %q", err, got)
		}
	}
	if got := bodyError(errors.New("multipart: NextPart: bufio: buffer full")); !strings.Contains(got, "multipart") {
		t.Errorf("the client's own framing error is lost: %q", got)
	}
}
