module github.com/timingwheel/timingwheel/lincheck

go 1.25.0

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/benbjohnson/clock v1.3.5
	github.com/timingwheel/timingwheel v0.1.0
)
