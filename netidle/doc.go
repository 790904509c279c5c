// Package netidle closes idle network connections on a
// [timingwheel.Hierarchy], and runs idle events for them (Netty's
// IdleStateHandler: reader idle, writer idle, all idle), with the
// hierarchy's exported API only.
//
//	h, _ := timingwheel.New()
//	h.Start()
//	ln = netidle.Listener(h, ln, 30*time.Second) // every accepted conn closed after 30 s without data read
//
// [Conn] wraps one net.Conn, [Listener] every conn a listener accepts, and
// a [Policy] shares one idle and set of [Option]s among a server's conns.
// Every conn returned implements [Control]: Pause and Resume (a request
// being served is not idle), SetIdle, IdleDeadline and NetConn. After the
// hierarchy closed a conn, its Read and Write return errors that
// errors.Is reports as [ErrIdle] (or [ErrLifetime]) and as
// os.ErrDeadlineExceeded.
//
// # How a conn is kept
//
// Each conn holds one [timingwheel.Timer] by value. A Read or Write that
// moves data stores the clock's reading in a word of the conn's own and
// touches nothing else: no lock, no timer. The timer fires at the earliest
// deadline the conn had when it was armed (its idle close or read-idle
// event, its write-idle event, the end of its lifetime), looks at the
// stored readings, closes the conn or runs the events that are due, and is
// armed again for what remains. A conn busy with traffic therefore costs
// its hierarchy one firing per idle period, and a Read costs the same from
// any number of cores.
//
// # Driving
//
// The hierarchy must be driven, by [timingwheel.Hierarchy.Start] or the
// caller's own Advance loop; an undriven hierarchy closes nothing.
package netidle
