package intent_test

import (
	"fmt"

	"github.com/searchfleet/searchfleet/pkg/intent"
)

// Under the selective policy web_search is offered when the latest user message asks
// for the web, or when the chain is sticky (an earlier call of the same chain
// searched and no final answer has ended it yet); under the always policy it is
// offered on every call.
func ExampleToolset_ShouldInject() {
	engines := []intent.Engine{{ID: "brave", Kind: "brave", Description: "Brave Search"}}
	selective, err := intent.NewToolset(intent.Config{Engines: engines})
	if err != nil {
		panic(err)
	}
	always, err := intent.NewToolset(intent.Config{Engines: engines, InjectPolicy: intent.PolicyAlways})
	if err != nil {
		panic(err)
	}
	for _, c := range []struct {
		text   string
		sticky bool
	}{
		{"search the web for today's exchange rates", false},
		{"write a haiku about autumn", false},
		{"and the rate one year ago?", true},
	} {
		r := selective.Classify(c.text)
		fmt.Printf("%q sticky=%v: selective=%v always=%v\n", c.text, c.sticky, selective.ShouldInject(r, c.sticky), always.ShouldInject(r, c.sticky))
	}
	// Output:
	// "search the web for today's exchange rates" sticky=false: selective=true always=true
	// "write a haiku about autumn" sticky=false: selective=false always=true
	// "and the rate one year ago?" sticky=true: selective=true always=true
}
