package main

// criteo-synth: the same samples as examples/ctr_train/synth_data.h (the
// hashes are the C++ ones on uint64, which wraps in Go as in C++).

import (
	"math"
	"sort"
)

const (
	numTables = 26
	numDense  = 13
)

func mix(x uint64) uint64 { // splitmix64 finaliser
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func unit(h uint64) float64 { return float64(h>>11) * (1.0 / 9007199254740992.0) }

func gauss(h uint64) float64 { // Box-Muller from two hashes
	u1, u2 := math.Max(unit(h), 1e-300), unit(mix(h))
	return math.Sqrt(-2.0*math.Log(u1)) * math.Cos(6.283185307179586*u2)
}

type sample struct {
	ids         [numTables]int64
	label       float32
	plantedProb float32
}

type generator struct {
	seed  uint64
	vocab int64
	cdf   []float64 // Zipf(alpha) over ranks 1..vocab
}

func newGenerator(seed uint64, vocab int64, alpha float64) *generator {
	g := &generator{seed: seed, vocab: vocab, cdf: make([]float64, vocab)}
	s := 0.0
	for k := range g.cdf {
		s += math.Pow(float64(k)+1.0, -alpha)
		g.cdf[k] = s
	}
	for k := range g.cdf {
		g.cdf[k] /= s
	}
	return g
}

func (g *generator) weight(t int, id int64) float64 {
	return 0.3 * gauss(mix(g.seed^mix(0x5eed0000+uint64(t))^mix(uint64(id))))
}

func (g *generator) denseWeight(j int) float64 {
	return 0.5 * gauss(mix(g.seed^(0xdead+uint64(j))))
}

// sample fills out with sample index of split (0 train, 1 held out).
func (g *generator) sample(split int, index int64, out *sample) {
	base := mix(g.seed ^ mix(uint64(split)<<56^uint64(index)))
	logit := -1.0
	for t := 0; t < numTables; t++ {
		u := unit(mix(base + 2*uint64(t) + 1))
		rank := int64(sort.SearchFloat64s(g.cdf, u)) // first cdf >= u
		if rank >= g.vocab {
			rank = g.vocab - 1
		}
		id := int64((uint64(rank)*0x9e3779b1 + uint64(t)*7919) & uint64(g.vocab-1))
		out.ids[t] = id
		logit += g.weight(t, id)
	}
	for j := 0; j < numDense; j++ {
		d := float32(gauss(mix(base + 1000 + uint64(j))))
		logit += g.denseWeight(j) * float64(d)
	}
	p := 1.0 / (1.0 + math.Exp(-logit))
	out.plantedProb = float32(p)
	out.label = 0
	if unit(mix(base+4242)) < p {
		out.label = 1
	}
}
