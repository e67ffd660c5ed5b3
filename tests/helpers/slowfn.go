// A small program for tests/test_format_profiles.py: CPU, heap and goroutine profiles of
// three functions; build it twice, with -ldflags "-X main.factor=4" making main.compact slower.
package main

import (
	"context"
	"crypto/sha256"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"time"
)

var factor = "1" // set per build: go build -ldflags "-X main.factor=4"

var sink byte
var keep [][]byte

//go:noinline
func checksum(n int) {
	buf := make([]byte, 256)
	for i := 0; i < n; i++ {
		s := sha256.Sum256(buf)
		buf[0] = s[0]
	}
	sink += buf[0]
}

//go:noinline
func encode(n int) {
	x := uint64(1)
	for i := 0; i < n*40; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	sink += byte(x)
}

//go:noinline
func compact(n int) {
	f, _ := strconv.Atoi(factor)
	x := uint32(7)
	for i := 0; i < n*100*f; i++ {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
	}
	sink += byte(x)
	if len(keep) < 64 { // a little heap for the heap profile; little garbage, so few GC preemptions
		keep = append(keep, make([]byte, 1<<12*f))
	}
}

func main() {
	cpu, _ := os.Create(os.Args[1])
	runtime.SetCPUProfileRate(500) // before StartCPUProfile, which then keeps it (and says so on stderr)
	pprof.StartCPUProfile(cpu)
	deadline := time.Now().Add(1200 * time.Millisecond)
	pprof.Do(context.Background(), pprof.Labels("handler", "write"), func(context.Context) {
		for time.Now().Before(deadline) {
			checksum(100)
			encode(400)
			compact(200)
		}
	})
	pprof.StopCPUProfile()
	cpu.Close()
	runtime.GC()
	heap, _ := os.Create(os.Args[2])
	pprof.WriteHeapProfile(heap)
	heap.Close()
	g, _ := os.Create(os.Args[3])
	pprof.Lookup("goroutine").WriteTo(g, 0)
	g.Close()
}
