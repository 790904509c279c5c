// Package gnetwheel runs timers of a [timingwheel.Hierarchy] on gnet's event
// loops: an idle timeout per connection, closed on the connection's own
// loop, and the EventLoop.Schedule that gnet v2 declares but does not
// implement.
//
// gnet's Conn is not safe to use off its event loop (Context, Write,
// EventLoop().Close), and its SetDeadline returns ErrUnsupportedOp. A
// timer's callback normally runs on the goroutine that advances the
// hierarchy, so each timer here is bound with [timingwheel.Timer.InitOn]
// to an executor that queues the callback on the conn's loop. Guarantee 4
// holds across that hop (API.md, guarantee 14): a Reset or Stop made on the
// loop after the timer fired and before its callback reached the loop
// cancels the callback. The idle timeouts themselves have no timer per
// connection: each loop keeps them in buckets by due millisecond, one timer
// per bucket, and a bucket's scan on the loop closes a connection only if
// it has been idle since an idle before then. So traffic that arrives
// while an idle close is on its way to the loop keeps the connection open.
//
// A gnet handler needs a few lines:
//
//	type session struct {
//		idle gnetwheel.Idle // held by value: no allocation per event
//	}
//
//	func (s *server) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
//		ss := new(session)
//		ss.idle.Init(s.idler, c) // s.idler = wheel.Idler(30*time.Second, ...)
//		c.SetContext(ss)
//		return nil, gnet.None
//	}
//
//	func (s *server) OnTraffic(c gnet.Conn) gnet.Action {
//		ss := c.Context().(*session)
//		ss.idle.Traffic() // data arrived: push the idle close back
//		...
//	}
//
//	func (s *server) OnClose(c gnet.Conn, err error) gnet.Action {
//		c.Context().(*session).idle.Close() // stop its timers
//		return gnet.None
//	}
//
// The hierarchy must be driven ([timingwheel.Hierarchy.Start]).
package gnetwheel
