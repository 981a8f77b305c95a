package engines_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/engines"
)

// An engine is built from its Config against any base URL: here an httptest server
// answers with a recorded Brave body, and the engine's Search turns it into
// normalized hits, the citation text the model reads and the search's cost.
func ExampleFromConfig() {
	body := fixtures.Read("brave/docs-shape-web-search.CONSTRUCTED.json")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/res/v1/web/search" || r.Header.Get("X-Subscription-Token") != "example-key" {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	defer srv.Close()

	reg, err := engines.FromConfig([]engines.Config{{ID: "web", Kind: "brave", BaseURL: srv.URL, APIKey: "example-key"}}, srv.Client())
	if err != nil {
		panic(err)
	}
	eng, _ := reg.Get("web")
	res, err := eng.Search(context.Background(), engines.Query{Query: "go generics tutorial", Count: 3})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Engine, len(res.Hits), "hits")
	for i, h := range res.Hits {
		fmt.Printf("[%d] %s\n    %s\n", i+1, h.Title, h.URL)
	}
	fmt.Printf("searches=%d cost=$%.3f\n", res.Usage.Searches, res.Usage.CostUSD)
	// Output:
	// web 3 hits
	// [1] Tutorial: Getting started with generics - The Go Programming Language
	//     https://go.dev/doc/tutorial/generics
	// [2] An Introduction To Generics - The Go Programming Language
	//     https://go.dev/blog/intro-generics
	// [3] Go 语言泛型入门教程 🚀 | 菜鸟教程
	//     https://www.runoob.com/go/go-generics.html
	// searches=1 cost=$0.005
}
