package intent

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestZZCorpus(t *testing.T) {
	files, _ := filepath.Glob("/tmp/perf/corpus/*")
	extra := []KeywordSet{Freshness, {Name: "custom", Keywords: []string{"天气", "#news", "5g", "Stock  Price", " ", "\xff"}}}
	c := NewClassifier(extra...)
	for _, f := range files {
		b, _ := os.ReadFile(f)
		lines := strings.Split(string(b), "\n")
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "string("), ")"))
		if err != nil {
			t.Fatal(f, err)
		}
		t0 := time.Now()
		done := make(chan bool)
		go func() {
			Classify(s)
			c.Classify(s)
			done <- true
		}()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			fmt.Printf("HANG fast on %q\n", s)
			continue
		}
		t1 := time.Now()
		reference(s, nil)
		reference(s, extra)
		if d := time.Since(t1); d > 10*time.Millisecond || t1.Sub(t0) > time.Millisecond {
			fmt.Println(len(s), t1.Sub(t0), d)
		}
	}
	fmt.Println("checked", len(files))
}
