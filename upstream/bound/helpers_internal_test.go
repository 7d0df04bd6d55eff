package bound

// serveAll is an upstream that takes every endpoint as it is.
type serveAll struct{}

func (serveAll) Serves(Endpoint) bool { return true }
