// Command fleetctl is a command-line client of searchfleet. It speaks only the HTTP
// API, so it works against any fleet it can reach:
//
//	fleetctl batch submit questions.txt --model sim-model --watch
//	fleetctl batch submit requests.jsonl
//	fleetctl batch watch batch_…          progress until the batch ends
//	fleetctl batch download batch_… -o answers.jsonl [--errors]
//	fleetctl batch list | get ID | cancel ID
//	fleetctl job submit "What is new in Go?" --wait
//	fleetctl job watch ID | get ID
//	fleetctl job replay ID --wait        re-run a job on its recorded searches
//	fleetctl search "nats jetstream" --engine brave
//	fleetctl research "How do tides work?" --effort high --watch
//	fleetctl engines check [--offline]    the providers' contract, engine by engine
//
// The fleet's address and API key come from --url and --api-key, or FLEETCTL_URL
// (default http://127.0.0.1:8080, what `make run` serves) and FLEETCTL_API_KEY.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/searchfleet/searchfleet/internal/cli"
)

func main() {
	cli.Main(func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Stdout, os.Stderr) })
}

// defaultURL is where `make run` serves the API.
const defaultURL = "http://127.0.0.1:8080"

const usage = `fleetctl talks to a searchfleet fleet over its HTTP API.

Usage:
  fleetctl [--url URL] [--api-key KEY] COMMAND [ARGS] [FLAGS]

Commands:
  batch submit FILE     submit a batch: a .jsonl file of OpenAI batch requests, or a
                        text file of one question per line (--model, --window, --meta k=v, --watch)
  batch watch ID        show a batch's progress until it ends (--interval)
  batch download ID     write a batch's output file, or its error file with --errors (-o FILE)
  batch list            list your batches (--limit)
  batch get ID          print a batch object
  batch cancel ID       cancel a batch
  job submit QUESTION   submit one question as an async job (--model, --wait)
  job watch ID          follow a job's events and print its answer
  job get ID            print a job's status and answer (--json for the raw job)
  job replay ID         re-run an ended job with its recorded searches, none paid (--wait)
  search QUERY          run one web search, no model (--engine, --count, --json)
  research QUESTION     start a research run (--model research/M, --effort low|medium|high|max);
                        --watch shows its plan and progress live and prints the report
  research watch ID     follow a run and print its report; research get ID prints it
  engines check         run each configured engine once against its provider and report
                        on the contract (--config FILE, --offline for the fixtures, --json)

Environment: FLEETCTL_URL (default ` + defaultURL + `), FLEETCTL_API_KEY.
`

// app is one invocation: where the fleet is, and where output goes.
type app struct {
	url    string
	key    string
	stdout io.Writer
	stderr io.Writer
	http   *http.Client
	// tty is set when stdout is a terminal: progress redraws one line.
	tty bool
}

// run runs fleetctl with args (without the program name), writing results to stdout
// and progress and notes to stderr.
//
// -h or --help, anywhere, prints the usage (of fleetctl, or of the command's flags) and
// is not an error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	err := runCommand(ctx, args, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a := &app{url: cmp.Or(os.Getenv("FLEETCTL_URL"), defaultURL), key: os.Getenv("FLEETCTL_API_KEY"), stdout: stdout, stderr: stderr,
		http: &http.Client{}, tty: isTerminal(stdout)}
	fs := a.flags("fleetctl")
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil { // up to the command: its flags are its own
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
		} else {
			fmt.Fprint(stderr, usage)
		}
		return err
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	a.url = strings.TrimRight(a.url, "/")
	cmd, rest := rest[0], rest[1:]
	switch cmd {
	case "batch", "job", "engines":
		if len(rest) == 0 {
			return fmt.Errorf("%s needs a subcommand (see fleetctl help)", cmd)
		}
		return a.dispatch(ctx, cmd+" "+rest[0], rest[1:])
	case "search":
		return a.search(ctx, rest)
	case "research":
		return a.research(ctx, rest)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	return fmt.Errorf("unknown command %q (see fleetctl help)", cmd)
}

// dispatch runs a two-word command.
func (a *app) dispatch(ctx context.Context, cmd string, args []string) error {
	commands := map[string]func(context.Context, []string) error{
		"batch submit": a.batchSubmit, "batch watch": a.batchWatch, "batch download": a.batchDownload,
		"batch list": a.batchList, "batch get": a.batchGet, "batch cancel": a.batchCancel,
		"job submit": a.jobSubmit, "job watch": a.jobWatch, "job get": a.jobGet, "job replay": a.jobReplay,
		"engines check": a.enginesCheck,
	}
	fn, ok := commands[cmd]
	if !ok {
		return fmt.Errorf("unknown command %q (see fleetctl help)", cmd)
	}
	return fn(ctx, args)
}

// flags returns a flag set that knows the global flags, so they may come anywhere.
func (a *app) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(a.stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage of fleetctl %s (see fleetctl help for the commands):\n", name)
		fs.PrintDefaults()
	}
	fs.StringVar(&a.url, "url", a.url, "the fleet's base URL (FLEETCTL_URL)")
	fs.StringVar(&a.key, "api-key", a.key, "API key (FLEETCTL_API_KEY)")
	return fs
}

// parse parses flags that may be mixed with positional arguments and returns the
// positional ones.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

// exactly parses a command's flags (parse) and checks that n positional arguments
// came with them.
func exactly(fs *flag.FlagSet, args []string, n int, what string) ([]string, error) {
	pos, err := parse(fs, args)
	if err == nil && len(pos) != n {
		err = fmt.Errorf("expected %s, got %d argument(s)", what, len(pos))
	}
	return pos, err
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// round shortens a duration for display.
func round(d time.Duration) time.Duration {
	if d > time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(100 * time.Millisecond)
}
