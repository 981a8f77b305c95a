package simulator

// groundedRoutesB is not built yet.
func groundedRoutesB() []engineRoute { return nil }
