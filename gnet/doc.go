// Package gnetwheel runs timers of a [timingwheel.Hierarchy] on gnet's event
// loops: an idle timeout per connection, closed on the connection's own
// loop, and the EventLoop.Schedule that gnet v2 declares but does not
// implement.
//
// gnet's Conn is not safe to use off its event loop (Context, Write,
// EventLoop().Close), and its SetDeadline returns ErrUnsupportedOp. A
// timer's callback normally runs on the goroutine that advances the
// hierarchy, so each timer here is bound with [timingwheel.Timer.InitOn]
// to an executor that queues the callback on the conn's loop. A timer's
// exactly-once rule holds across that hop (see "Callbacks on an executor"
// in the core's docs/guarantees.md): a Reset or Stop made on the loop
// after the timer fired and before its callback reached the loop cancels
// the callback. The idle timeouts themselves have no timer per
// connection: each loop keeps them in buckets by due millisecond, one timer
// per bucket, and a bucket's scan on the loop judges each connection's
// marks (its last traffic, its last write, its lifetime's end) at the
// instant fired, by the same code as package netidle's connections: it
// closes a connection only if it has been idle since an idle before then.
// So traffic that arrives while an idle close is on its way to the loop
// keeps the connection open.
//
// A gnet handler needs a few lines (s.idler is a [Wheel.Idler]):
//
//	type session struct{ idle gnetwheel.Idle } // held by value in c.Context()
//
//	func (s *server) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
//		ss := new(session)
//		ss.idle.Init(s.idler, c)
//		c.SetContext(ss)
//		return nil, gnet.None
//	}
//
//	func (s *server) OnTraffic(c gnet.Conn) gnet.Action {
//		ss := c.Context().(*session)
//		ss.idle.Traffic() // stores the time: no timer, lock or allocation
//		buf, _ := c.Next(-1)
//		ss.idle.Write(buf) // an echo: a write through Idle.Write pushes the ping back
//		return gnet.None
//	}
//
//	func (s *server) OnClose(c gnet.Conn, err error) gnet.Action {
//		ss := c.Context().(*session)
//		_ = ss.idle.Err() // gnetwheel.ErrIdle or ErrLifetime if the wheel closed it
//		ss.idle.Close()
//		return gnet.None
//	}
//
// The hierarchy must be driven ([timingwheel.Hierarchy.Start]).
//
// # Engines that stop
//
// A timer may fire after its loop has exited: the engine was stopped, or a
// handler returned gnet.Shutdown. Its callback then does not run, and its
// arming ends as if it had been stopped: the hierarchy no longer counts it
// ([timingwheel.Hierarchy.Len]), a [Wheel.Schedule]'s context registration
// is removed, and nothing of the task is kept. This holds whether gnet's
// EventLoop.Execute reports the shutdown or, as gnet v2.9.7 does for a loop
// that has exited before its engine is marked shut down, drops the task
// without an error: a batch queued for a loop that has not taken it within
// a few milliseconds is handed over again, until it runs or Execute fails.
// So a timer of a loop that has exited ends once gnet marks its engine
// shut down: for a server, once every loop has exited and OnShutdown has
// returned (a slow OnShutdown delays it); for a gnet.Client whose loop
// exited because a handler returned gnet.Shutdown, at Client.Stop. Until
// then gnet cannot tell an exited loop from a busy one, and the hierarchy
// still counts such timers; each is queued once, whatever its firings (a
// periodic one's included), so they hold no more memory than their
// timers do.
// A loop that has exited leaves the wheel's and the Idler's records of
// loops, so engines may be started and stopped any number of times with
// one Wheel. An [Idle] leaves its loop's buckets as gnet closes each conn
// (OnClose calls Idle.Close).
package gnetwheel
