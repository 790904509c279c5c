module github.com/timingwheel/timingwheel

go 1.25.0

require github.com/benbjohnson/clock v1.3.5
