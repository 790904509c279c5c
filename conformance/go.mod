module github.com/timingwheel/timingwheel/conformance

go 1.26.0

require (
	github.com/timingwheel/timingwheel v0.1.0
	golang.org/x/net v0.62.0
)

require github.com/benbjohnson/clock v1.3.5 // indirect
