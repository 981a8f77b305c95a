package simulator

// classicRoutes is not built yet.
func classicRoutes() []engineRoute { return nil }
