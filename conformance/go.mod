module github.com/timingwheel/timingwheel/conformance

go 1.26.0

replace github.com/timingwheel/timingwheel => ../

require (
	github.com/timingwheel/timingwheel v0.0.0-00010101000000-000000000000
	golang.org/x/net v0.62.0
)

require github.com/benbjohnson/clock v1.3.5 // indirect
