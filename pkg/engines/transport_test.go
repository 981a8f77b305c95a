package engines_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/engines"
)

// TestUnreachableEngineErrors: an engine that cannot be reached fails with a message
// that names no address (what the model and the client read), while the log form
// keeps the transport's details with the URL's query (the user's search) hidden.
func TestUnreachableEngineErrors(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now: connection refused
	reg, err := engines.FromConfig([]engines.Config{{ID: "sx", Kind: "searxng", BaseURL: "http://" + addr, APIKey: "sk-secret-key"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := reg.Get("sx")
	_, err = e.Search(context.Background(), engines.Query{Query: "my private question", Count: 5})
	var ee *engines.Error
	if !errors.As(err, &ee) || ee.Kind != engines.Unavailable || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("err = %v", err)
	}
	public := engines.ErrorResult("sx", "my private question", err)
	for _, s := range []string{ee.Public(), public.Citation.LLMContent, public.Citation.Error.Message} {
		if strings.Contains(s, addr) || strings.Contains(s, "dial tcp") || strings.Contains(s, "127.0.0.1") {
			t.Fatalf("client-visible error names the address: %s", s)
		}
		if !strings.Contains(s, "refused the connection") {
			t.Fatalf("client-visible error does not say why: %s", s)
		}
	}
	logged := err.Error()
	if !strings.Contains(logged, addr) || strings.Contains(logged, "private") || strings.Contains(logged, "sk-secret-key") {
		t.Fatalf("log form: %s", logged)
	}
}
