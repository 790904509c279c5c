package timingwheel_test

import (
	"expvar"
	"fmt"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/timingwheel/timingwheel"
)

// The hierarchy's counters on expvar's page, /debug/vars (served by
// http.DefaultServeMux once package expvar is imported): an expvar.Func
// reads h.Stats at each request. A Prometheus Collector doing the same is
// in examples/prometheus.
func ExampleHierarchy_Stats_expvar() {
	mock := clock.NewMock()
	h, _ := timingwheel.New(timingwheel.WithClock(mock))

	vars := expvar.Func(func() any {
		st := h.Stats()
		return map[string]any{
			"pending": st.Armed, // armed now
			"fired":   st.Fired, // counters since New
			"stopped": st.Stopped,
			// Upper bounds of the quantiles of how late callbacks ran.
			"lateness_p50_seconds": st.LatenessQuantile(0.5).Seconds(),
			"lateness_p99_seconds": st.LatenessQuantile(0.99).Seconds(),
			"lateness_max_seconds": st.MaxLateness.Seconds(),
		}
	})
	if expvar.Get("timingwheel") == nil { // Publish panics on a name published before
		expvar.Publish("timingwheel", vars)
	}

	h.AfterFunc(10*time.Millisecond, func() {})
	h.AfterFunc(20*time.Millisecond, func() {})
	h.AfterFunc(time.Minute, func() {}).Stop()
	h.AfterFunc(time.Hour, func() {})
	mock.Add(25 * time.Millisecond)
	h.Advance()

	fmt.Println(vars.String()) // what /debug/vars shows under "timingwheel"
	// Output:
	// {"fired":2,"lateness_max_seconds":0.015,"lateness_p50_seconds":0.008192,"lateness_p99_seconds":0.015,"pending":1,"stopped":1}
}
