package demo

import (
	"net"

	"github.com/timingwheel/timingwheel"
)

// StartServing returns a hierarchy on the real clock with its driver
// started, which the caller stops, and a TCP listener on a free port of
// 127.0.0.1 for the demo's server; on an error it has left nothing running.
func StartServing() (*timingwheel.Hierarchy, net.Listener, error) {
	h, err := timingwheel.New()
	if err != nil {
		return nil, nil, err
	}
	h.Start()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.Stop()
		return nil, nil, err
	}
	return h, ln, nil
}
