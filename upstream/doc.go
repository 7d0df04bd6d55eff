// Package upstream speaks the providers' wire formats: it parses and rewrites
// client requests (so that the gateway's estimate is a true upper bound),
// and turns responses — JSON bodies and SSE streams — into budget.Usage.
//
// It never calls the budget engine and never touches a store: the HTTP layer
// runs the estimate → reserve → forward → settle sequence.
package upstream
