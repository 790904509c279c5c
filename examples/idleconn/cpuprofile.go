package main

// Timer CPU is measured with the runtime's CPU profiler: the hierarchy's
// driver goroutine carries the label timer=driver (it inherits it from the
// goroutine that called Start), and the server sets timer=arm around its
// Timeouts calls. The expiry callback drops the label while it closes
// sockets, which is the application's work, not the timers'. The profile is
// decoded here, without dependencies: it is gzipped protocol buffers in the
// format described by the pprof project's profile.proto.

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime/pprof"
	"time"
)

type cpuReport struct {
	Driver, Arm, Total    time.Duration
	Samples, TimerSamples int64
}

type cpuMeter struct{ buf bytes.Buffer }

func startCPUMeter() (*cpuMeter, error) {
	m := new(cpuMeter)
	if err := pprof.StartCPUProfile(&m.buf); err != nil {
		return nil, err // most likely a profile is already running (go test -cpuprofile)
	}
	return m, nil
}

func (m *cpuMeter) stop() (cpuReport, error) {
	pprof.StopCPUProfile()
	return cpuByLabel(&m.buf)
}

// cpuByLabel sums CPU time per value of the "timer" label in a gzipped
// CPU profile.
func cpuByLabel(r io.Reader) (cpuReport, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return cpuReport{}, err
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return cpuReport{}, err
	}

	// Profile: sample_type = 1 (ValueType: type = 1), sample = 2 (Sample:
	// value = 2, label = 3 (Label: key = 1, str = 2)), string_table = 6.
	// Strings are indexes into the table, which may come last.
	type sample struct {
		values []int64
		labels [][2]int64 // key, value
	}
	var (
		samples []sample
		types   []int64
		strs    []string
	)
	err = pbFields(raw, func(f pbField) error {
		switch f.num {
		case 1:
			types = append(types, 0)
			return pbFields(f.b, func(g pbField) error {
				if g.num == 1 {
					types[len(types)-1] = int64(g.u)
				}
				return nil
			})
		case 2:
			var s sample
			err := pbFields(f.b, func(g pbField) error {
				switch {
				case g.num == 2 && g.wire == 0:
					s.values = append(s.values, int64(g.u))
				case g.num == 2: // packed
					for p := g.b; len(p) > 0; {
						v, n := binary.Uvarint(p)
						if n <= 0 {
							return errTruncated
						}
						s.values, p = append(s.values, int64(v)), p[n:]
					}
				case g.num == 3:
					var kv [2]int64
					err := pbFields(g.b, func(l pbField) error {
						if l.num == 1 || l.num == 2 {
							kv[l.num-1] = int64(l.u)
						}
						return nil
					})
					s.labels = append(s.labels, kv)
					return err
				}
				return nil
			})
			samples = append(samples, s)
			return err
		case 6:
			strs = append(strs, string(f.b))
		}
		return nil
	})
	if err != nil {
		return cpuReport{}, err
	}

	str := func(i int64) string {
		if i < 0 || i >= int64(len(strs)) {
			return ""
		}
		return strs[i]
	}
	cpuIdx, countIdx := -1, -1
	for i, t := range types {
		switch str(t) {
		case "cpu":
			cpuIdx = i
		case "samples":
			countIdx = i
		}
	}
	if cpuIdx < 0 || countIdx < 0 {
		return cpuReport{}, errors.New("CPU profile has no cpu or samples values")
	}
	var rep cpuReport
	for _, s := range samples {
		if cpuIdx >= len(s.values) || countIdx >= len(s.values) {
			continue
		}
		d, n := time.Duration(s.values[cpuIdx]), s.values[countIdx]
		rep.Total += d
		rep.Samples += n
		for _, kv := range s.labels {
			if str(kv[0]) != "timer" {
				continue
			}
			switch str(kv[1]) {
			case "driver":
				rep.Driver += d
				rep.TimerSamples += n
			case "arm":
				rep.Arm += d
				rep.TimerSamples += n
			}
		}
	}
	return rep, nil
}

// pbField is one field of a protocol buffer message: a varint (u) or a
// length-delimited value (b); fixed-size values are skipped.
type pbField struct {
	num, wire int
	u         uint64
	b         []byte
}

var errTruncated = errors.New("CPU profile: truncated protocol buffer")

// pbFields calls fn for each varint or length-delimited field of msg.
func pbFields(msg []byte, fn func(pbField) error) error {
	for len(msg) > 0 {
		key, n := binary.Uvarint(msg)
		if n <= 0 {
			return errTruncated
		}
		msg = msg[n:]
		f := pbField{num: int(key >> 3), wire: int(key & 7)}
		switch f.wire {
		case 0:
			f.u, n = binary.Uvarint(msg)
			if n <= 0 {
				return errTruncated
			}
			msg = msg[n:]
		case 2:
			size, n := binary.Uvarint(msg)
			if n <= 0 || size > uint64(len(msg)-n) {
				return errTruncated
			}
			f.b, msg = msg[n:n+int(size)], msg[n+int(size):]
		case 1, 5:
			size := 8
			if f.wire == 5 {
				size = 4
			}
			if size > len(msg) {
				return errTruncated
			}
			msg = msg[size:]
			continue
		default:
			return fmt.Errorf("CPU profile: unexpected wire type %d", f.wire)
		}
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}
