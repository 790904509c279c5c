// Package demo holds what the demos under examples/ (and the gnet module's)
// share: fitting their connections under the open-file limit, and reading
// the process's CPU time.
package demo
