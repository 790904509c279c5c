package main

// Timer CPU is measured with the runtime's CPU profiler. A sample is timer
// work by where it was taken:
//
//   - wheel mode: in the timingwheel package, or in what it calls, except
//     below the netidle conn wrapper's Read, Write, Close and expiry, which call
//     package net: reading and closing sockets is the application's work.
//     Samples on the driver goroutine (labelled timer=driver: it inherits
//     the label from the goroutine that called Start) are the driver's; the
//     rest are the re-arming on Read.
//   - deadline mode: in the reader's SetReadDeadline(time.Now().Add(...))
//     and what it calls. The runtime timers that then fire those deadlines
//     run in the scheduler, where they cannot be told apart from the demo
//     clients' own timers, so they are not counted.
//
// The profile is decoded here, without dependencies: it is gzipped protocol
// buffers in the format described by the pprof project's profile.proto.

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime/pprof"
	"strings"
	"time"
)

type cpuReport struct {
	Total   time.Duration
	Samples int64

	Driver, Rearm time.Duration // wheel mode: timer work on the driver goroutine, and elsewhere
	Deadline      time.Duration // deadline mode: setting read deadlines
	TimerSamples  int64
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
	return cpuByStack(&m.buf)
}

// The library's functions, by the prefix of their names in a profile.
const libPrefix = "github.com/timingwheel/timingwheel."

// wrapperIO are the netidle conn wrapper's functions that call package net.
var wrapperIO = []string{
	libPrefix + "(*idleConn).Read",
	libPrefix + "(*idleConn).Write",
	libPrefix + "(*idleConn).Close",
	libPrefix + "(*idleConn).expire",
	libPrefix + "(*idleListener).Accept",
}

// wheelWork reports whether a sample with these frames, leaf first, is the
// timing wheel's work: the innermost frame of the library is the leaf
// itself, or is not one of the wrapper's calls into package net.
func wheelWork(frames []string) bool {
	for i, f := range frames {
		if !strings.HasPrefix(f, libPrefix) {
			continue
		}
		if i == 0 {
			return true
		}
		for _, w := range wrapperIO {
			if f == w || strings.HasPrefix(f, w+"-") { // expire-fm: the method value
				return false
			}
		}
		return true
	}
	return false
}

// deadlineWork reports whether a sample with these frames, leaf first, is
// deadline mode's reader setting a read deadline: it is inside
// deadlineReader.Read but not in the Read of the socket. (This package is
// "main" in the program and named by its import path in its tests.)
func deadlineWork(frames []string) bool {
	for _, f := range frames {
		switch {
		case f == "net.(*conn).Read":
			return false
		case strings.HasSuffix(f, ".(*deadlineReader).Read"):
			return true
		}
	}
	return false
}

// cpuByStack sums the CPU time of a gzipped CPU profile, and of the samples
// in it that are timer work.
func cpuByStack(r io.Reader) (cpuReport, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return cpuReport{}, err
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return cpuReport{}, err
	}

	// Profile: sample_type = 1 (ValueType: type = 1), sample = 2 (Sample:
	// location_id = 1, value = 2, label = 3 (Label: key = 1, str = 2)),
	// location = 4 (Location: id = 1, line = 4 (Line: function_id = 1)),
	// function = 5 (Function: id = 1, name = 2), string_table = 6. Strings
	// are indexes into the table, which may come last. A location's lines
	// run from the innermost inlined function out.
	type sample struct {
		locs   []uint64
		values []int64
		labels [][2]int64 // key, value
	}
	var (
		samples []sample
		types   []int64
		strs    []string
		locFns  = map[uint64][]uint64{} // location id -> function ids, innermost first
		fnName  = map[uint64]int64{}    // function id -> string index
	)
	varints := func(g pbField, out *[]uint64) error {
		if g.wire == 0 {
			*out = append(*out, g.u)
			return nil
		}
		for p := g.b; len(p) > 0; { // packed
			v, n := binary.Uvarint(p)
			if n <= 0 {
				return errTruncated
			}
			*out, p = append(*out, v), p[n:]
		}
		return nil
	}
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
				switch g.num {
				case 1:
					return varints(g, &s.locs)
				case 2:
					var v []uint64
					err := varints(g, &v)
					for _, x := range v {
						s.values = append(s.values, int64(x))
					}
					return err
				case 3:
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
		case 4:
			var id uint64
			var fns []uint64
			err := pbFields(f.b, func(g pbField) error {
				switch g.num {
				case 1:
					id = g.u
				case 4:
					return pbFields(g.b, func(l pbField) error {
						if l.num == 1 {
							fns = append(fns, l.u)
						}
						return nil
					})
				}
				return nil
			})
			locFns[id] = fns
			return err
		case 5:
			var id uint64
			var name int64
			err := pbFields(f.b, func(g pbField) error {
				switch g.num {
				case 1:
					id = g.u
				case 2:
					name = int64(g.u)
				}
				return nil
			})
			fnName[id] = name
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
	var frames []string
	for _, s := range samples {
		if cpuIdx >= len(s.values) || countIdx >= len(s.values) {
			continue
		}
		d, n := time.Duration(s.values[cpuIdx]), s.values[countIdx]
		rep.Total += d
		rep.Samples += n
		frames = frames[:0]
		for _, l := range s.locs {
			for _, fn := range locFns[l] {
				frames = append(frames, str(fnName[fn]))
			}
		}
		switch {
		case wheelWork(frames):
			driver := false
			for _, kv := range s.labels {
				driver = driver || str(kv[0]) == "timer" && str(kv[1]) == "driver"
			}
			if driver {
				rep.Driver += d
			} else {
				rep.Rearm += d
			}
			rep.TimerSamples += n
		case deadlineWork(frames):
			rep.Deadline += d
			rep.TimerSamples += n
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
