// Package budget is Tollgate's core: money, prices, limits, reservations and
// the engine that reserves an upper bound before a request is forwarded and
// settles the real usage afterwards.
//
// The package is pure. It takes the current time as an argument (or a clock
// passed in), keeps money as int64 micro-dollars and never imports HTTP,
// Redis or Prometheus. Stores implement [Store]; every store must pass the
// contract suite in budget/storetest.
package budget
