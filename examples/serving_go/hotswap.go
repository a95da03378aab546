package main

// Hot swapping (-hotswap DIR): a trainer goroutine trains the wide model
// (26 embedding rows of dim 1 per sample, logistic loss) and every
// -steps batches writes the next version into DIR as a delta
// (ExportVersion(path, v, v-1)); an updater applies each one to a serving
// table (Update) while scoring goroutines keep looking up held-out
// samples. Each lookup reports the version it read: a scorer's versions
// never go back, and the held-out AUC of the versions improves as
// training goes on. Trainer and server share only the files in DIR, as
// two processes would.

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"hb.dev/hb"
)

func versionPath(dir string, v int64) string {
	return filepath.Join(dir, fmt.Sprintf("wide.v%d.hbe", v))
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

func hotswap(dir string, seed uint64, vocab int64, n, workers, versions, steps int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ctx, err := hb.NewContext(hb.WithRank(0), hb.WithWorldSize(1))
	if err != nil {
		return err
	}
	defer ctx.Close()
	cfg := hb.DefaultEmbeddingConfig("wide", 1)
	cfg.Optimizer, cfg.LearningRate = hb.OptAdagrad, 0.1
	train, err := hb.NewEmbedding(ctx, cfg)
	if err != nil {
		return err
	}
	defer train.Close()
	if err := train.ExportVersion(versionPath(dir, 1), 1, 0); err != nil {
		return err
	}
	serve, err := hb.OpenEmbedding(versionPath(dir, 1))
	if err != nil {
		return err
	}
	defer serve.Close()

	gen := newGenerator(seed, vocab, 1.1)
	held := make([]sample, n)
	for i := range held {
		gen.sample(1, int64(i), &held[i])
	}

	// Scorers: held-out batches, one lookup each, until the last version.
	var stop atomic.Bool
	var lookups, backwards atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			ids := make([]int64, batch*numTables)
			rows := make([]float32, batch*numTables)
			last := int64(0)
			for i := w * batch; !stop.Load(); i = (i + workers*batch) % (n - batch) {
				for k := 0; k < batch; k++ {
					for t := 0; t < numTables; t++ {
						ids[k*numTables+t] = int64(t)*vocab + held[i+k].ids[t]
					}
				}
				v, err := serve.LookupVersion(ids, rows)
				if err != nil || v < last {
					backwards.Add(1)
				}
				last = v
				lookups.Add(1)
			}
		}(w)
	}

	// Trainer -> files -> updater.
	ready := make(chan int64, versions)
	trainErr := make(chan error, 1)
	go func() {
		defer close(ready)
		var s sample
		ids := make([]int64, batch*numTables)
		rows := make([]float32, batch*numTables)
		grads := make([]float32, batch*numTables)
		next := int64(0)
		for v := int64(2); v <= int64(versions); v++ {
			for st := 0; st < steps; st++ {
				labels := make([]float32, batch)
				for k := 0; k < batch; k++ {
					gen.sample(0, next, &s)
					next++
					labels[k] = s.label
					for t := 0; t < numTables; t++ {
						ids[k*numTables+t] = int64(t)*vocab + s.ids[t]
					}
				}
				if err := train.Lookup(ids, rows); err != nil {
					trainErr <- err
					return
				}
				for k := 0; k < batch; k++ {
					z := 0.0
					for t := 0; t < numTables; t++ {
						z += float64(rows[k*numTables+t])
					}
					g := float32(sigmoid(z)) - labels[k] // d logloss / d logit
					for t := 0; t < numTables; t++ {
						grads[k*numTables+t] = g / batch
					}
				}
				if err := train.ApplyGradients(ids, grads); err != nil {
					trainErr <- err
					return
				}
			}
			if err := train.ExportVersion(versionPath(dir, v), v, v-1); err != nil {
				trainErr <- err
				return
			}
			ready <- v
		}
		trainErr <- nil
	}()

	auc := func() (float64, error) {
		m, err := hb.NewMetric(nil, hb.DefaultMetricConfig(hb.MetricAUCExact))
		if err != nil {
			return 0, err
		}
		defer m.Close()
		ids := make([]int64, numTables)
		rows := make([]float32, numTables)
		labels, preds := make([]float32, n), make([]float32, n)
		for i := range held {
			for t := 0; t < numTables; t++ {
				ids[t] = int64(t)*vocab + held[i].ids[t]
			}
			if err := serve.Lookup(ids, rows); err != nil {
				return 0, err
			}
			z := 0.0
			for _, r := range rows {
				z += float64(r)
			}
			labels[i], preds[i] = held[i].label, float32(sigmoid(z))
		}
		if err := m.Update(labels, preds, nil); err != nil {
			return 0, err
		}
		return m.Result()
	}
	first, err := auc()
	if err != nil {
		return err
	}
	fmt.Printf("version 1: %d rows, held-out AUC %.4f\n", serve.LocalRows(), first)
	var final float64
	for v := range ready {
		t0 := time.Now()
		if err := serve.Update(versionPath(dir, v)); err != nil {
			return err
		}
		applied := time.Since(t0)
		a, err := auc()
		if err != nil {
			return err
		}
		final = a
		fmt.Printf("version %d: applied in %.2f ms while %d goroutines looked up, %d rows, held-out AUC %.4f\n",
			serve.Version(), applied.Seconds()*1e3, workers, serve.LocalRows(), a)
	}
	stop.Store(true)
	wg.Wait()
	if err := <-trainErr; err != nil {
		return err
	}
	if backwards.Load() != 0 {
		return fmt.Errorf("%d lookups failed or read an older version than the one before", backwards.Load())
	}
	fmt.Printf("hot swap: %d versions served, %d lookups during the swaps, versions never went back; AUC %.4f -> %.4f\n",
		serve.Version(), lookups.Load(), first, final)
	return nil
}
