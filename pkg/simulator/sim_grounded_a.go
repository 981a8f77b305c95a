package simulator

// groundedRoutesA is not built yet.
func groundedRoutesA() []engineRoute { return nil }
