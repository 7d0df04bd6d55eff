// Package e2e holds end-to-end tests: the whole gateway (embedded store,
// real HTTP) driven by the official OpenAI Go SDK and plain HTTP clients,
// in front of the simulated upstream.
package e2e
