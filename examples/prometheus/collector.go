package main

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/timingwheel/timingwheel"
)

// latenessQuantiles are the quantiles of callback lateness exported, each
// as a gauge of its own.
var latenessQuantiles = []struct {
	q    float64
	name string
}{{0.5, "p50"}, {0.9, "p90"}, {0.99, "p99"}, {0.999, "p999"}}

// collector exports a hierarchy's Stats, read at each scrape:
//
//	timingwheel_timers_pending                          timers armed now (gauge)
//	timingwheel_timers_started_total                    armings since New
//	timingwheel_timers_fired_total                      callbacks started since New
//	timingwheel_timers_stopped_total                    Stop calls that stopped an armed timer
//	timingwheel_callback_lateness_p99_seconds           an upper bound of the 0.99 quantile of how
//	                                                    late callbacks ran after their due tick,
//	                                                    since New (gauge; also p50, p90, p999)
//	timingwheel_callback_lateness_max_seconds           the largest lateness seen (gauge)
//
// The quantiles are gauges, not a summary, whose quantile label would
// promise a sum: Stats counts lateness in buckets of doubling width and
// keeps no sum. Register one collector per hierarchy, told apart by
// constant labels.
type collector struct {
	h                                *timingwheel.Hierarchy
	pending, started, fired, stopped *prometheus.Desc
	latenessQuantiles                []*prometheus.Desc // of latenessQuantiles
	latenessMax                      *prometheus.Desc
}

// newCollector returns a prometheus.Collector of h's Stats; labels (nil for
// none) are added to every metric, e.g. {"wheel": "conns"}.
func newCollector(h *timingwheel.Hierarchy, labels prometheus.Labels) prometheus.Collector {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("timingwheel_"+name, help, nil, labels)
	}
	c := &collector{
		h:           h,
		pending:     desc("timers_pending", "Timers armed now."),
		started:     desc("timers_started_total", "Timers armed since the hierarchy was made, each periodic run counted."),
		fired:       desc("timers_fired_total", "Timer callbacks started since the hierarchy was made."),
		stopped:     desc("timers_stopped_total", "Stop calls that stopped an armed timer."),
		latenessMax: desc("callback_lateness_max_seconds", "The largest lateness of a callback after its due tick."),
	}
	for _, q := range latenessQuantiles {
		c.latenessQuantiles = append(c.latenessQuantiles, desc("callback_lateness_"+q.name+"_seconds",
			fmt.Sprintf("An upper bound of the %v quantile of how late callbacks ran after their due tick, since the hierarchy was made.", q.q)))
	}
	return c
}

// Describe sends the descriptions of the metrics Collect sends.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.pending, c.started, c.fired, c.stopped, c.latenessMax} {
		ch <- d
	}
	for _, d := range c.latenessQuantiles {
		ch <- d
	}
}

// Collect sends the metrics of one h.Stats() snapshot.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.h.Stats()
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(st.Armed))
	ch <- prometheus.MustNewConstMetric(c.started, prometheus.CounterValue, float64(st.Started))
	ch <- prometheus.MustNewConstMetric(c.fired, prometheus.CounterValue, float64(st.Fired))
	ch <- prometheus.MustNewConstMetric(c.stopped, prometheus.CounterValue, float64(st.Stopped))
	for i, q := range latenessQuantiles {
		ch <- prometheus.MustNewConstMetric(c.latenessQuantiles[i], prometheus.GaugeValue, st.LatenessQuantile(q.q).Seconds())
	}
	ch <- prometheus.MustNewConstMetric(c.latenessMax, prometheus.GaugeValue, st.MaxLateness.Seconds())
}
