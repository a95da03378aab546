// Serving from Go: open an exported wide table (hb_embedding_open, no
// context), score held-out criteo-synth samples from several goroutines
// (lookups on a serving table are thread-safe), and compute the exact AUC
// with a local metric.
//
//	serving_go -wide export/wide.hbe -seed 2026 -vocab 2048 -samples 4096 -workers 4
//	serving_go -hotswap DIR -versions 8 -steps 40 [-seed -vocab -samples -workers]
//
// The scorer is serving_ref's (examples/serving_ref): sigmoid of the sum
// of the sample's 26 wide rows, with table 25's id replaced by an unknown
// one on every 16th sample. The last line, "AUC <auc> misses <n>", must
// equal serving_ref's.
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"hb.dev/hb"
)

const batch = 64 // samples per lookup call

func main() {
	wide := flag.String("wide", "", "exported wide table (wide.hbe)")
	seed := flag.Uint64("seed", 2026, "data seed (as ctr_train's --seed)")
	vocab := flag.Int64("vocab", 2048, "ids per table (as ctr_train's --vocab)")
	n := flag.Int("samples", 4096, "held-out samples to score")
	workers := flag.Int("workers", 4, "scoring goroutines")
	swapDir := flag.String("hotswap", "", "train, export versions into this folder and serve them (hotswap.go)")
	versions := flag.Int("versions", 8, "-hotswap: versions to export and serve")
	steps := flag.Int("steps", 40, "-hotswap: training batches per version")
	flag.Parse()
	if *swapDir != "" {
		if err := hotswap(*swapDir, *seed, *vocab, *n, *workers, *versions, *steps); err != nil {
			fmt.Fprintln(os.Stderr, "serving_go:", err)
			os.Exit(1)
		}
		return
	}
	if *wide == "" || *vocab <= 0 || *vocab&(*vocab-1) != 0 || *n <= 0 || *workers <= 0 {
		fmt.Fprintln(os.Stderr, "serving_go: -wide is required; -vocab a power of two; -samples, -workers > 0")
		os.Exit(2)
	}
	if err := run(*wide, *seed, *vocab, *n, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "serving_go:", err)
		os.Exit(1)
	}
}

func run(path string, seed uint64, vocab int64, n, workers int) error {
	table, err := hb.OpenEmbedding(path)
	if err != nil {
		return err
	}
	defer table.Close()
	if d := table.Dim(); d != 1 {
		return fmt.Errorf("%s: dim %d, expected 1", path, d)
	}

	gen := newGenerator(seed, vocab, 1.1)
	samples := make([]sample, n)
	for i := range samples {
		gen.sample(1, int64(i), &samples[i])
	}
	labels := make([]float32, n)
	for i := range samples {
		labels[i] = samples[i].label
	}

	// Workers claim batches of samples from a shared counter.
	preds := make([]float32, n)
	var next int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := make([]int64, batch*numTables)
			rows := make([]float32, batch*numTables)
			for {
				lo := int(atomic.AddInt64(&next, batch)) - batch
				if lo >= n {
					return
				}
				hi := lo + batch
				if hi > n {
					hi = n
				}
				if err := score(table, vocab, samples, lo, hi, ids, rows, preds); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}

	metric, err := hb.NewMetric(nil, hb.DefaultMetricConfig(hb.MetricAUCExact))
	if err != nil {
		return err
	}
	defer metric.Close()
	if err := metric.Update(labels, preds, nil); err != nil {
		return err
	}
	auc, err := metric.Result()
	if err != nil {
		return err
	}
	fmt.Printf("serving_go: %d samples, %d goroutines, %.4f s: %.0f samples/s, %.0f rows/s\n",
		n, workers, elapsed, float64(n)/elapsed, float64(n*numTables)/elapsed)
	fmt.Printf("AUC %.9f misses %d\n", auc, table.Misses())
	return nil
}

// score writes preds[lo:hi] with one lookup for the batch.
func score(table *hb.Embedding, vocab int64, samples []sample, lo, hi int, ids []int64,
	rows []float32, preds []float32) error {
	m := (hi - lo) * numTables
	for i := lo; i < hi; i++ {
		k := (i - lo) * numTables
		for t := 0; t < numTables; t++ {
			ids[k+t] = int64(t)*vocab + samples[i].ids[t]
		}
		if i%16 == 0 { // an id the table never holds
			ids[k+numTables-1] = numTables*vocab + int64(i)
		}
	}
	if err := table.Lookup(ids[:m], rows[:m]); err != nil {
		return err
	}
	for i := lo; i < hi; i++ {
		s := 0.0
		for _, r := range rows[(i-lo)*numTables : (i-lo+1)*numTables] {
			s += float64(r)
		}
		preds[i] = float32(1.0 / (1.0 + math.Exp(-s)))
	}
	return nil
}
