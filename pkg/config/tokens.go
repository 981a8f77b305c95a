package config

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/searchfleet/searchfleet/pkg/provider"
)

// AccessToken is an engine's OAuth access token source (seed 003: Gemini through
// Vertex AI, OpenAI), instead of an API key: a file some other process keeps fresh,
// or a command that prints a token. The token is sent where the engine kind sends its
// key (a bearer token), so it suits gemini with options.vertex, openai and the other
// bearer kinds.
type AccessToken struct {
	// File holds the token; it is read again for every search, so whatever renews it
	// (a sidecar, a cron job) is picked up at once.
	File string `json:"file,omitempty"`
	// Command prints a token on stdout ("gcloud auth print-access-token"), run without
	// a shell. It runs for the first search, again after RefreshEvery, and at once
	// when the provider refuses the token.
	Command []string `json:"command,omitempty"`
	// RefreshEvery is how long a command's token is used (default 50m: Google's
	// access tokens live an hour).
	RefreshEvery Duration `json:"refreshEvery,omitempty"`
}

// DefaultTokenRefresh is how long a token command's token is used by default.
const DefaultTokenRefresh = 50 * time.Minute

// tokenCommandTimeout bounds one run of a token command.
const tokenCommandTimeout = 30 * time.Second

// validate checks the accessToken of the entry at path, whose apiKeyEnv is keyEnv.
func (a *AccessToken) validate(path, keyEnv string, bad func(string, ...any)) {
	switch {
	case (a.File == "") == (len(a.Command) == 0):
		bad("%s.accessToken needs exactly one of file and command", path)
	case len(a.Command) > 0 && a.Command[0] == "":
		bad("%s.accessToken.command[0] must name a program", path)
	case a.RefreshEvery < 0:
		bad("%s.accessToken.refreshEvery must not be negative", path)
	}
	if keyEnv != "" {
		bad("%s: give apiKeyEnv or accessToken, not both", path)
	}
}

// source checks that the token can be had (the file reads to a token, the command's
// program exists) and returns the provider.TokenSource. Errors never hold a token.
func (a *AccessToken) source(path string) (provider.TokenSource, error) {
	s := &tokenSource{file: a.File, command: a.Command, every: time.Duration(a.RefreshEvery)}
	if s.every <= 0 {
		s.every = DefaultTokenRefresh
	}
	if s.file != "" {
		if _, err := s.readFile(); err != nil {
			return nil, fmt.Errorf("%s.accessToken: %s: %w", path, s.file, err)
		}
		return s, nil
	}
	if _, err := exec.LookPath(s.command[0]); err != nil {
		return nil, fmt.Errorf("%s.accessToken.command: %q is not an executable program", path, s.command[0])
	}
	return s, nil
}

// tokenSource is a token file or command.
type tokenSource struct {
	file    string
	command []string
	every   time.Duration

	mu      sync.Mutex
	tok     string
	fetched time.Time
}

// readFile reads the token file. Its errors name no path: at search time they reach
// the job's result.
func (s *tokenSource) readFile() (string, error) {
	b, err := os.ReadFile(s.file)
	if err != nil {
		return "", fmt.Errorf("the token file cannot be read: %w", errors.Unwrap(err))
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", errors.New("the token file is empty")
	}
	return tok, nil
}

// Token returns the file's token, or the command's while it is fresh.
func (s *tokenSource) Token(ctx context.Context) (string, error) {
	if s.file != "" {
		return s.readFile()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tok != "" && time.Since(s.fetched) < s.every {
		return s.tok, nil
	}
	cctx, cancel := context.WithTimeout(ctx, tokenCommandTimeout)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(cctx, s.command[0], s.command[1:]...)
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		// Neither stdout nor stderr goes into the error: either may hold a token. Nor
		// the command's path: the error reaches the job's result.
		return "", fmt.Errorf("the token command failed: %w", err)
	}
	tok := strings.TrimSpace(out.String())
	if tok == "" {
		return "", errors.New("the token command printed no token")
	}
	s.tok, s.fetched = tok, time.Now()
	return tok, nil
}

// Rejected drops a refused command token, so the next Token runs the command. A file
// is read for every search anyway.
func (s *tokenSource) Rejected(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tok == tok {
		s.tok = ""
	}
}
