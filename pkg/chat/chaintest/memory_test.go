package chaintest_test

import (
	"testing"

	"github.com/searchfleet/searchfleet/pkg/chat/chaintest"
)

func TestMemoryConformance(t *testing.T) {
	t.Parallel()
	chaintest.Run(t, func(*testing.T) chaintest.Store { return chaintest.NewMemory() })
}
