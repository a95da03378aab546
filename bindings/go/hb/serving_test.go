package hb

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Every float of version v is v: SGD with rate 1 and gradient -1 on every
// id, once per version.
func allEqual(rows []float32, v float32) bool {
	for _, f := range rows {
		if f != v {
			return false
		}
	}
	return true
}

// Versioned exports followed by a serving table while goroutines look up:
// every call reads one version (the one it reports), out-of-order and
// damaged files are refused with the served version intact.
func TestServingFollowsVersionsUnderLoad(t *testing.T) {
	const n, dim, versions = 100, 4, 12
	dir := t.TempDir()
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i*7 - 50)
	}
	c := worldOfOne(t)
	cfg := DefaultEmbeddingConfig("gs", dim)
	cfg.Optimizer, cfg.LearningRate = OptSGD, 1
	e, err := NewEmbedding(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	grads := make([]float32, n*dim)
	for i := range grads {
		grads[i] = -1
	}
	files := make([]string, versions+1)
	for v := 1; v <= versions; v++ {
		if err := e.ApplyGradients(ids, grads); err != nil {
			t.Fatal(err)
		}
		files[v] = filepath.Join(dir, fmt.Sprintf("v%d.hbe", v))
		base := int64(v - 1)
		if v == 1 || v%5 == 0 {
			base = 0
		}
		if err := e.ExportVersion(files[v], int64(v), base); err != nil {
			t.Fatal(err)
		}
	}
	rows := make([]float32, n*dim)
	if v, err := e.LookupVersion(ids, rows); err != nil || v != 0 {
		t.Fatal("a sharded table has no version:", v, err)
	}
	e.Close()
	c.Close()

	s, err := OpenEmbedding(files[1])
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, err := s.LookupVersion(ids, rows); err != nil || v != 1 || s.Version() != 1 || !allEqual(rows, 1) {
		t.Fatal(v, err, s.Version())
	}
	err = s.Update(files[3])
	if e, ok := err.(*Error); !ok || e.Status != ErrInvalidArgument || !strings.Contains(e.Message, "delta from version 2") {
		t.Fatal("out-of-order delta:", err)
	}
	var stop atomic.Bool
	var mixed, calls atomic.Int64
	var wg sync.WaitGroup
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := make([]float32, n*dim)
			for !stop.Load() {
				v, err := s.LookupVersion(ids, out)
				if err != nil || !allEqual(out, float32(v)) {
					mixed.Add(1)
				}
				calls.Add(1)
			}
		}()
	}
	for v := 2; v <= versions; v++ {
		if err := s.Update(files[v]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	if mixed.Load() != 0 || calls.Load() == 0 || s.Version() != versions {
		t.Fatal("mixed", mixed.Load(), "calls", calls.Load(), "version", s.Version())
	}
	data, err := os.ReadFile(files[versions])
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 1
	bad := filepath.Join(dir, "bad.hbe")
	if err := os.WriteFile(bad, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err, ok := s.Update(bad).(*Error); !ok || err.Status != ErrCorrupt || s.Version() != versions {
		t.Fatal("damaged file:", err, s.Version())
	}
	if _, err := s.LookupVersion(ids, rows[:n*dim-1]); err == nil || !strings.Contains(err.Error(), "out") {
		t.Fatal("short out:", err)
	}
}
