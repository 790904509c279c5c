module github.com/timingwheel/timingwheel/gnet

go 1.25.0

require (
	github.com/benbjohnson/clock v1.3.5
	github.com/panjf2000/gnet/v2 v2.9.7
	github.com/timingwheel/timingwheel v0.1.0
	golang.org/x/sys v0.30.0
)

require (
	github.com/panjf2000/ants/v2 v2.11.3 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	go.uber.org/zap v1.27.0 // indirect
	golang.org/x/sync v0.11.0 // indirect
	gopkg.in/natefinch/lumberjack.v2 v2.2.1 // indirect
)
