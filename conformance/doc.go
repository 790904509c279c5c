// Package conformance runs golang.org/x/net/nettest's conformance suite for
// net.Conn implementations against the conns of package netidle (netidle.Conn),
// with every combination of its options.
//
// It is a module of its own so that the library's go.mod stays free of
// x/net:
//
//	cd conformance && go test -race ./...
package conformance
