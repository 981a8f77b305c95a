package intent

import (
	"strings"
	"testing"
)

// benchMessage is a realistic 2 KB user message: English prose about code, a code
// fragment, a URL, a little Chinese, digits and punctuation. It contains keyword
// nouns ("information", "online", "reports") but no verb, so no rule fires and the
// classifier scans all of it: the worst case.
const benchMessage = `Hi! I'm refactoring the payment service and would like a careful review of the retry logic below. The function reads a batch of pending transfers from Postgres, groups them by merchant, and calls the settlement API with exponential back-off (base 200ms, factor 2, max 5 attempts). Yesterday we saw duplicate settlements when the API timed out after committing, so I added an idempotency key built from the transfer id and the attempt number. 我觉得这个地方可能有问题，因为重试的时候 key 会变。 Could you check whether the key should stay the same across attempts, and whether the transaction boundary is in the right place?

    func (s *Settler) Run(ctx context.Context) error {
        batch, err := s.store.Pending(ctx, 500)
        if err != nil {
            return fmt.Errorf("pending: %w", err)
        }
        for merchant, transfers := range groupByMerchant(batch) {
            key := fmt.Sprintf("%s-%d", transfers[0].ID, attempt)
            if err := s.api.Settle(ctx, merchant, transfers, key); err != nil {
                s.log.Warn("settle failed", "merchant", merchant, "err", err)
                continue
            }
        }
        return nil
    }

Our on-call runbook (https://wiki.example.internal/payments/runbook#retries) says the settlement API deduplicates on the key for 24 hours, but the vendor's documentation only promises 1 hour. The monthly reports for March show 17 duplicates out of 1.2M settlements, all within 3 minutes of a timeout. Other information that may help: we run 6 replicas, each with its own batch cursor; Postgres is 15.4; the API client is generated from the vendor's OpenAPI spec v2.3.1; the online dashboard shows p99 latency of 2.8s for the settle call. I'd also like your opinion on whether we should move to an outbox table instead of calling the API inside the loop. Thanks a lot!`

// benchNoHit and benchLateHit are exactly 2048 bytes; benchLateHit asks for a web
// search in its last sentence only.
var (
	benchChineseNoHit = pad2K(strings.Repeat("我觉得这个地方可能有问题，因为重试的时候会变。", 10))
	benchNoHit        = pad2K(benchMessage)
	benchLateHit      = pad2K(benchMessage)[:2048-len(lateHit)] + lateHit
)

func pad2K(s string) string {
	for len(s) < 2048 {
		s += " " + s
	}
	return s[:2048]
}

func BenchmarkClassify2KB(b *testing.B) {
	for _, bc := range []struct {
		name string
		text string
		c    *Classifier
		want bool
	}{
		{"no-hit", benchNoHit, nil, false},
		{"late-hit", benchLateHit, nil, true},
		{"no-hit-freshness", benchNoHit, NewClassifier(Freshness), false},
		{"chinese-no-hit", benchChineseNoHit, nil, false},
		// The fleet's classifier: Freshness is on by default (DefaultKeywordSets).
		{"chinese-no-hit-freshness", benchChineseNoHit, NewClassifier(DefaultKeywordSets()...), false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if len(bc.text) != 2048 {
				b.Fatalf("text is %d bytes", len(bc.text))
			}
			b.SetBytes(int64(len(bc.text)))
			b.ReportAllocs()
			for b.Loop() {
				if bc.c.Classify(bc.text).WebSearch != bc.want {
					b.Fatal("unexpected verdict")
				}
			}
		})
	}
}

func BenchmarkToolJSON(b *testing.B) {
	ts := mustToolset(b, twoEnginesNoDefault)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n += len(ts.Tool(false)) + len(ts.Tool(true))
	}
	if n == 0 {
		b.Fatal("empty tool")
	}
}

func BenchmarkParse(b *testing.B) {
	ts := mustToolset(b, twoEnginesNoDefault)
	args := `{"engine":"glm","query":"今天的国际新闻头条","recency":"oneDay","count":3,"allowed_domains":["reuters.com","https://www.bbc.co.uk/news"]}`
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ts.Parse(args, false); err != nil {
			b.Fatal(err)
		}
	}
}

const lateHit = " P.S. please search the web for the vendor's dedup window."
