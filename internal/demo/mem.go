package demo

import "runtime"

// MemAfterGC returns the memory statistics after two full collections
// (what had a finalizer is freed by the second): its HeapAlloc is the live
// heap, not what waits for the collector.
func MemAfterGC() runtime.MemStats {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms
}
