package hb

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"hb.dev/hb/internal/capi"
)

func TestConstantsMatchTheLibrary(t *testing.T) {
	pairs := []struct {
		ours   int
		theirs int
	}{
		{OK, int(capi.HB_OK)}, {ErrInvalidArgument, int(capi.HB_ERR_INVALID_ARGUMENT)},
		{ErrConfig, int(capi.HB_ERR_CONFIG)}, {ErrTimeout, int(capi.HB_ERR_TIMEOUT)},
		{ErrPeerFailed, int(capi.HB_ERR_PEER_FAILED)}, {ErrAborted, int(capi.HB_ERR_ABORTED)},
		{ErrIO, int(capi.HB_ERR_IO)}, {ErrOutOfMemory, int(capi.HB_ERR_OUT_OF_MEMORY)},
		{ErrUnsupported, int(capi.HB_ERR_UNSUPPORTED)}, {ErrDevice, int(capi.HB_ERR_DEVICE)},
		{ErrPermission, int(capi.HB_ERR_PERMISSION)}, {ErrCorrupt, int(capi.HB_ERR_CORRUPT)},
		{ErrInternal, int(capi.HB_ERR_INTERNAL)}, {ErrMismatch, int(capi.HB_ERR_MISMATCH)},
		{int(Float32DType), int(capi.HB_FLOAT32)}, {int(Float64DType), int(capi.HB_FLOAT64)},
		{int(Float16DType), int(capi.HB_FLOAT16)}, {int(BFloat16DType), int(capi.HB_BFLOAT16)},
		{int(Int32DType), int(capi.HB_INT32)}, {int(Int64DType), int(capi.HB_INT64)},
		{int(Uint8DType), int(capi.HB_UINT8)},
		{int(Sum), int(capi.HB_SUM)}, {int(Prod), int(capi.HB_PROD)}, {int(Min), int(capi.HB_MIN)},
		{int(Max), int(capi.HB_MAX)}, {int(Avg), int(capi.HB_AVG)},
		{EventBeforeSave, int(capi.HB_EVENT_BEFORE_SAVE)}, {EventAfterSave, int(capi.HB_EVENT_AFTER_SAVE)},
		{EventBeforeLoad, int(capi.HB_EVENT_BEFORE_LOAD)}, {EventAfterLoad, int(capi.HB_EVENT_AFTER_LOAD)},
		{PartitionMod, int(capi.HB_PARTITION_MOD)}, {PartitionDiv, int(capi.HB_PARTITION_DIV)},
		{InitZeros, int(capi.HB_INIT_ZEROS)}, {InitConstant, int(capi.HB_INIT_CONSTANT)},
		{InitUniform, int(capi.HB_INIT_UNIFORM)}, {InitNormal, int(capi.HB_INIT_NORMAL)},
		{OptSGD, int(capi.HB_OPT_SGD)}, {OptAdagrad, int(capi.HB_OPT_ADAGRAD)},
		{OptAdam, int(capi.HB_OPT_ADAM)}, {OptFTRL, int(capi.HB_OPT_FTRL)},
		{MetricAccuracy, int(capi.HB_METRIC_ACCURACY)}, {MetricMean, int(capi.HB_METRIC_MEAN)},
		{MetricAUC, int(capi.HB_METRIC_AUC)}, {MetricAUCExact, int(capi.HB_METRIC_AUC_EXACT)},
		{MetricGAUC, int(capi.HB_METRIC_GAUC)}, {CurveROC, int(capi.HB_CURVE_ROC)},
		{CurvePR, int(capi.HB_CURVE_PR)}, {SummationTrapezoidal, int(capi.HB_SUMMATION_TRAPEZOIDAL)},
		{SummationCarefulInterpolation, int(capi.HB_SUMMATION_CAREFUL_INTERPOLATION)},
		{SummationMinoring, int(capi.HB_SUMMATION_MINORING)}, {SummationMajoring, int(capi.HB_SUMMATION_MAJORING)},
		{GAUCUnweighted, int(capi.HB_GAUC_UNWEIGHTED)}, {GAUCImpressions, int(capi.HB_GAUC_IMPRESSIONS)},
		{GAUCClicks, int(capi.HB_GAUC_CLICKS)}, {MetricFlagEmpty, int(capi.HB_METRIC_FLAG_EMPTY)},
		{MetricFlagSingleClass, int(capi.HB_METRIC_FLAG_SINGLE_CLASS)},
		{MetricFlagApproximate, int(capi.HB_METRIC_FLAG_APPROXIMATE)},
	}
	for i, p := range pairs {
		if p.ours != p.theirs {
			t.Errorf("constant %d: Go has %d, hb.h has %d", i, p.ours, p.theirs)
		}
	}
}

func TestVersionAndNames(t *testing.T) {
	if VersionNumber() != uint(capi.HB_VERSION_NUMBER) {
		t.Fatalf("version %d", VersionNumber())
	}
	if !strings.HasPrefix(BuildInfo(), "hb ") || StatusName(ErrTimeout) != "HB_ERR_TIMEOUT" {
		t.Fatal(BuildInfo(), StatusName(ErrTimeout))
	}
	if DTypeSize(Float64DType) != 8 || DTypeSize(99) != 0 {
		t.Fatal("dtype sizes")
	}
}

func TestErrorCarriesStatusAndMessage(t *testing.T) {
	_, _, err := ShardRange(10, 0, 0, false)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("not an *hb.Error: %v", err)
	}
	if e.Status != ErrInvalidArgument || e.Name != "HB_ERR_INVALID_ARGUMENT" || e.Message == "" {
		t.Fatalf("%+v", e)
	}
	if err.Error() != "HB_ERR_INVALID_ARGUMENT: "+e.Message {
		t.Fatal(err.Error())
	}
}

// Errors from many goroutines at once: each carries its own call's message,
// although goroutines move between threads and hb_last_error is per thread.
func TestConcurrentErrorsKeepTheirMessage(t *testing.T) {
	var wg sync.WaitGroup
	failures := make(chan string, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				name := fmt.Sprintf("no_such_option_%d_%d", g, i)
				_, err := GetOption(name)
				if e, ok := err.(*Error); !ok || !strings.Contains(e.Message, name) {
					failures <- fmt.Sprintf("%s: %v", name, err)
					return
				}
				runtime.Gosched()
			}
		}(g)
	}
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Error(f)
	}
}

func TestShardRangePlacementTFConfigOptions(t *testing.T) {
	var covered int64
	for s := 0; s < 3; s++ {
		b, e, err := ShardRange(10, 3, s, false)
		if err != nil || b != covered {
			t.Fatal(b, e, err)
		}
		covered = e
	}
	if covered != 10 {
		t.Fatal(covered)
	}
	p, err := PlacementReplication(4, 0, 3)
	if err != nil || len(p.BuildSubnetwork) != 3 || !p.BuildSubnetwork[2] {
		t.Fatal(p, err)
	}
	doc, err := TFConfigBuild("worker", 0, []string{"h0:1", "h1:2"}, []string{"p0:3"}, false)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Cluster map[string][]string
		Task    struct {
			Type  string
			Index int
		}
	}
	if err := json.Unmarshal([]byte(doc), &cfg); err != nil {
		t.Fatal(err, doc)
	}
	if cfg.Cluster["chief"][0] != "h0:1" || cfg.Cluster["ps"][0] != "p0:3" || cfg.Task.Type != "worker" {
		t.Fatal(doc)
	}
	if _, err := TFConfigBuild("nobody", 0, []string{"h0:1"}, nil, false); err == nil {
		t.Fatal("task type nobody accepted")
	}
	o, err := DescribeOption(0)
	if err != nil || o.Name == "" {
		t.Fatal(o, err)
	}
	if v, err := GetOption(o.Name); err != nil || v != o.Default {
		t.Fatal(v, err)
	}
	_, err = GetOption("no_such_option")
	if e, ok := err.(*Error); !ok || !strings.Contains(e.Message, "no_such_option") {
		t.Fatal(err)
	}
}

func TestLocalMetrics(t *testing.T) {
	labels, preds, weights := samples(400, 7)
	m, err := NewMetric(nil, DefaultMetricConfig(MetricAUCExact))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Update(labels, preds, weights); err != nil {
		t.Fatal(err)
	}
	got, err := m.Result()
	if want := exactAUC(labels, preds, weights); err != nil || math.Abs(got-want) > 1e-12 {
		t.Fatal(got, want, err)
	}
	if err := m.Update(labels, preds[:3], nil); err == nil || !strings.Contains(err.Error(), "preds: 3 elements") {
		t.Fatal(err)
	}
	if _, err := NewMetric(nil, DefaultMetricConfig(99)); err == nil {
		t.Fatal("metric kind 99 accepted")
	}
	m.Close()
	m.Close() // twice is fine
}

func worldOfOne(t *testing.T) *Context {
	c, err := NewContext(WithRank(0), WithWorldSize(1))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCollectivesInAWorldOfOne(t *testing.T) {
	c := worldOfOne(t)
	defer c.Close()
	if c.Rank() != 0 || c.WorldSize() != 1 || !c.IsChief() {
		t.Fatal(c.Rank(), c.WorldSize())
	}
	if err := c.SetOption("timeout_ms", "soon"); err == nil || err.(*Error).Status != ErrConfig {
		t.Fatal(err)
	}
	x := []float32{1, 2, 3}
	y := make([]float32, 3)
	if err := Allreduce(c, x, y, Sum); err != nil || y[2] != 3 {
		t.Fatal(y, err)
	}
	h := []Float16{0x3C00}
	if err := Allreduce(c, h, h, Max); err != nil || h[0] != 0x3C00 {
		t.Fatal(h, err)
	}
	req, err := AllreduceStart(c, x, Sum)
	if err != nil {
		t.Fatal(err)
	}
	z := make([]float32, 3)
	if err := req.Wait(z); err != nil || z[0] != 1 || z[2] != 3 {
		t.Fatal(z, err)
	}
	if err := req.Wait(z); err == nil || !strings.Contains(err.Error(), "already waited") {
		t.Fatal("a second Wait:", err)
	}
	g := make([]int64, 2)
	if err := Allgather(c, []int64{7, 8}, g); err != nil || g[1] != 8 {
		t.Fatal(g, err)
	}
	many := [][]float64{{1}, {2, 3}}
	if err := AllreduceMany(c, many, Sum); err != nil || many[1][1] != 3 {
		t.Fatal(many, err)
	}
	if err := Allreduce(c, x, y[:2], Sum); err == nil || err.Error() != "HB_ERR_INVALID_ARGUMENT: recv: needs 3 elements, has 2" {
		t.Fatal(err)
	}
	err = Allreduce(c, x, y, 77)
	if e, ok := err.(*Error); !ok || e.Status != ErrInvalidArgument || !strings.Contains(e.Message, "77") {
		t.Fatal(err)
	}
}

func TestEmbeddingAndServing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.hbe")
	c := worldOfOne(t)
	cfg := DefaultEmbeddingConfig("t", 2)
	cfg.Optimizer, cfg.LearningRate = OptSGD, 0.5
	e, err := NewEmbedding(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ids := []int64{4, 2, 4}
	if err := e.ApplyGradients(ids, []float32{1, 1, 1, 1, 1, 1}); err != nil {
		t.Fatal(err)
	}
	rows := make([]float32, 4)
	if err := e.Lookup([]int64{4, 2}, rows); err != nil || rows[0] != -1 || rows[2] != -0.5 {
		t.Fatal(rows, err)
	}
	if err := e.Export(path); err != nil {
		t.Fatal(err)
	}
	e.Close()
	c.Close()
	s, err := OpenEmbedding(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Lookup([]int64{2, 99}, rows); err != nil || rows[0] != -0.5 || rows[2] != 0 || s.Misses() != 1 {
		t.Fatal(rows, err, s.Misses())
	}
	if _, err := OpenEmbedding(path + ".missing"); err == nil || !strings.Contains(err.Error(), ".missing") {
		t.Fatal(err)
	}
}

func TestCollectionMatchesSingleTableCalls(t *testing.T) {
	ctx := worldOfOne(t)
	defer ctx.Close()
	mk := func(name string, dim int64) *Embedding {
		cfg := DefaultEmbeddingConfig(name, dim)
		cfg.LearningRate = 0.5
		e, err := NewEmbedding(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	a, b := mk("ga", 2), mk("gb", 1)
	defer a.Close()
	defer b.Close()
	c, err := NewCollection(ctx, []*Embedding{a, b, a}, []int32{PoolingSum, PoolingMean, PoolingNone})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// B = 2: feature 0 bags {4, 2}, {}; feature 1 {7}, {7, 8}; feature 2 {4}, {5}.
	values := []int64{4, 2, 7, 7, 8, 4, 5}
	offsets := []int64{0, 2, 2, 3, 5, 6, 7}
	out, unpooled := make([]float32, 6), make([]float32, c.UnpooledSize(offsets))
	if err := c.Lookup(values, offsets, nil, out, unpooled); err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyGradients(values, offsets, nil, []float32{1, 2, 4, 0, 0, 8}, []float32{1, 1, 1, 1}); err != nil {
		t.Fatal(err)
	}
	rows := make([]float32, 6)
	if err := a.Lookup([]int64{4, 2, 5}, rows); err != nil {
		t.Fatal(err)
	}
	want := []float32{-1, -1.5, -0.5, -1, -0.5, -0.5}
	for i := range want {
		if rows[i] != want[i] {
			t.Fatalf("table a rows %v, want %v", rows, want)
		}
	}
	st, err := c.Stats()
	if err != nil || st.ReusedPlans != 1 || st.Rounds != 4 {
		t.Fatalf("stats %+v, %v", st, err)
	}
	if err := c.Lookup(values, []int64{0, 1}, nil, out, unpooled); err == nil {
		t.Fatal("bad offsets accepted")
	}
	// The dense sum in the update (world 1: a copy), the plan reused.
	if err := c.Lookup(values, offsets, nil, out, unpooled); err != nil {
		t.Fatal(err)
	}
	dense, denseOut := []float32{1.5, -2, 1e8}, make([]float32, 3)
	grads := []float32{1, 2, 4, 0, 0, 8}
	if err := c.ApplyGradientsDense(values, offsets, nil, grads, []float32{1, 1, 1, 1}, dense, denseOut); err != nil {
		t.Fatal(err)
	}
	for i := range dense {
		if denseOut[i] != dense[i] {
			t.Fatalf("dense sum %v, want %v", denseOut, dense)
		}
	}
	if st, err = c.Stats(); err != nil || st.ReusedPlans != 2 || st.Updates != 2 {
		t.Fatalf("stats %+v, %v", st, err)
	}
	err = c.ApplyGradientsDense(values, offsets, nil, grads, []float32{1, 1, 1, 1}, dense, denseOut[:2])
	if err == nil || !strings.Contains(err.Error(), "denseOut") {
		t.Fatalf("a short denseOut: %v", err)
	}
}

func TestListenersAroundSaveAndLoad(t *testing.T) {
	ckpt := filepath.Join(t.TempDir(), "ckpt")
	c := worldOfOne(t)
	defer c.Close()
	var events []string
	record := func(event int32, path string) { events = append(events, fmt.Sprintf("%d:%s", event, path)) }
	if err := c.AddListener(EventBeforeSave, record); err != nil {
		t.Fatal(err)
	}
	if err := c.AddListener(EventAfterLoad, record); err != nil {
		t.Fatal(err)
	}
	if err := c.AddListener(42, record); err == nil {
		t.Fatal("event 42 accepted")
	}
	cfg := DefaultEmbeddingConfig("saved", 2)
	cfg.LearningRate = 1
	e, err := NewEmbedding(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ids, grads, rows := []int64{3}, []float32{1, 1}, make([]float32, 2)
	for _, step := range []func() error{
		func() error { return e.ApplyGradients(ids, grads) },
		func() error { return e.Save(ckpt) },
		func() error { return e.ApplyGradients(ids, grads) },
		func() error { return e.Load(ckpt) },
		func() error { return e.Lookup(ids, rows) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{fmt.Sprintf("%d:%s", EventBeforeSave, ckpt), fmt.Sprintf("%d:%s", EventAfterLoad, ckpt)}
	if rows[0] != -1 || fmt.Sprint(events) != fmt.Sprint(want) {
		t.Fatal(rows, events, want)
	}
}

// TestMultiRank runs under hbrun (ctest go_binding_mp): allreduce, an
// embedding lookup/update and AUC against references computed here.
func TestMultiRank(t *testing.T) {
	if os.Getenv("HB_WORLD_SIZE") == "" {
		t.Skip("not launched by hbrun")
	}
	c, err := NewContext()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rank, world := c.Rank(), c.WorldSize()
	if world < 2 {
		t.Fatal("needs 2 ranks or more")
	}
	factor := float32(world * (world + 1) / 2)
	x := make([]float32, 8)
	for i := range x {
		x[i] = float32(i * (rank + 1))
	}
	if err := Allreduce(c, x, x, Sum); err != nil {
		t.Fatal(err)
	}
	for i, v := range x {
		if v != float32(i)*factor {
			t.Fatalf("allreduce element %d: %v", i, v)
		}
	}

	// AllreduceStart: bit-identical to Allreduce, two in flight, a blocking
	// collective between start and wait. Magnitudes far apart: any other
	// order than rank order changes bits.
	rng := rand.New(rand.NewSource(int64(rank)))
	a := make([]float32, 3001)
	for i := range a {
		a[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.Intn(13)-6)))
	}
	neg := make([]float64, 77)
	for i := range neg {
		neg[i] = -float64(a[i])
	}
	ra, err := AllreduceStart(c, a, Sum)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := AllreduceStart(c, neg, Min)
	if err != nil {
		t.Fatal(err)
	}
	wantA := append([]float32(nil), a...)
	if err := Allreduce(c, wantA, wantA, Sum); err != nil {
		t.Fatal(err)
	}
	wantB := append([]float64(nil), neg...)
	if err := Allreduce(c, wantB, wantB, Min); err != nil {
		t.Fatal(err)
	}
	gotA, gotB := make([]float32, len(a)), make([]float64, len(neg))
	if err := ra.Wait(gotA); err != nil {
		t.Fatal(err)
	}
	if err := rb.Wait(gotB); err != nil {
		t.Fatal(err)
	}
	for i := range gotA {
		if math.Float32bits(gotA[i]) != math.Float32bits(wantA[i]) {
			t.Fatalf("AllreduceStart element %d: %v != %v", i, gotA[i], wantA[i])
		}
	}
	for i := range gotB {
		if gotB[i] != wantB[i] {
			t.Fatalf("AllreduceStart (min) element %d: %v != %v", i, gotB[i], wantB[i])
		}
	}

	cfg := DefaultEmbeddingConfig("mp_table", 4)
	cfg.Initializer, cfg.InitA, cfg.Optimizer, cfg.LearningRate = InitConstant, 0.5, OptSGD, 0.125
	e, err := NewEmbedding(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ids := []int64{int64(rank), 7, int64(100 + rank), 7}
	grads := make([]float32, 16)
	for i := range grads {
		grads[i] = float32(rank + 1)
	}
	if err := e.ApplyGradients(ids, grads); err != nil {
		t.Fatal(err)
	}
	every := []int64{7}
	for r := 0; r < world; r++ {
		every = append(every, int64(r), int64(100+r))
	}
	rows := make([]float32, 4*len(every))
	if err := e.Lookup(every, rows); err != nil {
		t.Fatal(err)
	}
	for k, id := range every {
		want := 0.5 - 0.125*float64(id%100+1)
		if id == 7 {
			want = 0.5 - 0.125*2*float64(factor)
		}
		for d := 0; d < 4; d++ {
			if math.Abs(float64(rows[4*k+d])-want) > 1e-6 {
				t.Fatalf("row %d: %v, want %v", id, rows[4*k+d], want)
			}
		}
	}
	if err := e.Lookup(make([]int64, 3*rank), make([]float32, 12*rank)); err != nil {
		t.Fatal(err) // ranks may pass different counts, including none
	}

	labels, preds, weights := samples(1000, 42)
	dist, err := NewMetric(c, DefaultMetricConfig(MetricAUCExact))
	if err != nil {
		t.Fatal(err)
	}
	defer dist.Close()
	if err := dist.Update(stride(labels, rank, world), stride(preds, rank, world), stride(weights, rank, world)); err != nil {
		t.Fatal(err)
	}
	got, err := dist.Result()
	if want := exactAUC(labels, preds, weights); err != nil || math.Abs(got-want) > 1e-12 {
		t.Fatal(got, want, err)
	}

	err = c.SetOption("no_such_option", "1")
	if e, ok := err.(*Error); !ok || e.Status != ErrConfig || !strings.Contains(e.Message, "no_such_option") {
		t.Fatal(err)
	}
	if err := c.Barrier(0); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkAllreduce measures the binding's per-call cost in a world of one
// (hb.test -test.run NONE -test.bench Allreduce).
func BenchmarkAllreduce(b *testing.B) {
	c, err := NewContext(WithRank(0), WithWorldSize(1))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for _, n := range []int{4, 1 << 20} {
		x, r := make([]float32, n), make([]float32, n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if err := Allreduce(c, x, r, Sum); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
