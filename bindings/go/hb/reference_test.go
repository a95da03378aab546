package hb

import (
	"math"
	"math/rand"
)

// exactAUC is the ROC AUC over every (positive, negative) pair, ties one
// half, computed here independently of libhb.
func exactAUC(labels, preds, weights []float32) float64 {
	var num, den float64
	for i := range labels {
		if labels[i] <= 0.5 {
			continue
		}
		for j := range labels {
			if labels[j] > 0.5 {
				continue
			}
			w := float64(weights[i]) * float64(weights[j])
			switch {
			case preds[i] > preds[j]:
				num += w
			case preds[i] == preds[j]:
				num += w / 2
			}
			den += w
		}
	}
	return num / den
}

// samples are labels, predictions (with ties) and weights, the same on every rank.
func samples(n int, seed int64) (labels, preds, weights []float32) {
	rng := rand.New(rand.NewSource(seed))
	labels, preds, weights = make([]float32, n), make([]float32, n), make([]float32, n)
	for i := 0; i < n; i++ {
		if rng.Float64() < 0.3 {
			labels[i] = 1
		}
		preds[i] = float32(math.Round((rng.Float64()*0.5+float64(labels[i])*0.3)*100) / 100)
		weights[i] = float32(1 + rng.Intn(3))
	}
	return
}

func stride(a []float32, start, step int) []float32 {
	var out []float32
	for i := start; i < len(a); i += step {
		out = append(out, a[i])
	}
	return out
}
