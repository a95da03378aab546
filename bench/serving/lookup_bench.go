// The Go line of bench/serving/lookup_compare.sh: one goroutine's lookups
// on an exported table through the Go binding, with serving_bench's id
// stream (xorshift64, 65536 ids, BATCH copied in bulk per call), for SECONDS of its
// thread's CPU time.
//
//	lookup_bench_go PATH BATCH SECONDS   ->   calls/s <x> ids/s <y>
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"

	"hb.dev/hb"
)

// threadCPU is the CPU time of the calling OS thread (RUSAGE_THREAD): the
// rate counts what a call costs, not what other processes take.
func threadCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		panic(err)
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) * 1e-9
}

func main() {
	runtime.LockOSThread() // threadCPU measures this goroutine's thread
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: lookup_bench_go PATH BATCH SECONDS")
		os.Exit(2)
	}
	batch, _ := strconv.Atoi(os.Args[2])
	secs, _ := strconv.ParseFloat(os.Args[3], 64)
	s, err := hb.OpenEmbedding(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer s.Close()
	rows := uint64(s.LocalRows())
	stream := make([]int64, 65536)
	x := uint64(88172645463325252)
	for i := range stream {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		stream[i] = int64(x % rows)
	}
	for i := 0; i < batch; i++ { // a call's ids are one slice: repeat the start
		stream = append(stream, stream[i&65535])
	}
	ids := make([]int64, batch)
	out := make([]float32, batch*int(s.Dim()))
	at, calls := 0, 0
	start := threadCPU()
	var el float64
	for {
		for k := 0; k < 1024; k++ {
			copy(ids, stream[at:at+batch])
			at = (at + batch) & 65535
			if _, err := s.LookupVersion(ids, out); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
		calls += 1024
		if el = threadCPU() - start; el >= secs {
			break
		}
	}
	fmt.Printf("calls/s %.0f ids/s %.0f\n", float64(calls)/el, float64(calls*batch)/el)
}
