package hb

import "hb.dev/hb/internal/capi"

// MetricConfig mirrors hb_metric_config. Start from DefaultMetricConfig.
type MetricConfig struct {
	Kind          int32
	NumThresholds int32
	Curve         int32
	Summation     int32
	GAUCWeighting int32
	Threshold     float64 // accuracy: >= 0 thresholds predictions first
	Bins          int64   // exact AUC / GAUC: 0 exact, > 0 bounded memory
}

// DefaultMetricConfig is HB_METRIC_CONFIG_INIT for a kind (Metric*).
func DefaultMetricConfig(kind int32) MetricConfig {
	c := capi.NewMetric_config()
	defer capi.DeleteMetric_config(c)
	return MetricConfig{Kind: kind, NumThresholds: c.GetNum_thresholds(), Curve: c.GetCurve(),
		Summation: c.GetSummation(), GAUCWeighting: c.GetGauc_weighting(),
		Threshold: c.GetThreshold(), Bins: c.GetBins()}
}

// Metric is a streaming metric. With a context Result is collective and
// merges every rank's samples; without one (nil) it is local.
type Metric struct{ handle }

// NewMetric creates a metric; c may be nil.
func NewMetric(c *Context, config MetricConfig) (*Metric, error) {
	n := capi.NewMetric_config()
	defer capi.DeleteMetric_config(n)
	n.SetKind(config.Kind)
	n.SetNum_thresholds(config.NumThresholds)
	n.SetCurve(config.Curve)
	n.SetSummation(config.Summation)
	n.SetGauc_weighting(config.GAUCWeighting)
	n.SetThreshold(config.Threshold)
	n.SetBins(config.Bins)
	var ctx uintptr
	if c != nil {
		ctx = c.raw()
	}
	m := &Metric{}
	if err := capi.Metric_create(ctx, n, &m.h); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Metric) raw() uintptr { return m.get("Metric") }

// Close frees the metric; closing twice is fine.
func (m *Metric) Close() error {
	m.close(capi.Metric_destroy)
	return nil
}

func checkSamples(labels, preds, weights []float32) error {
	if len(preds) != len(labels) {
		return argError("preds: %d elements, labels has %d", len(preds), len(labels))
	}
	if weights != nil && len(weights) != len(labels) {
		return argError("weights: %d elements, labels has %d", len(weights), len(labels))
	}
	return nil
}

// Update adds samples; weights may be nil (all 1).
func (m *Metric) Update(labels, preds, weights []float32) error {
	if err := checkSamples(labels, preds, weights); err != nil {
		return err
	}
	return capi.Metric_update(m.raw(), ptr(labels), ptr(preds), ptr(weights), int64(len(labels)))
}

// UpdateGrouped adds samples with a group id each (GAUC).
func (m *Metric) UpdateGrouped(labels, preds, weights []float32, groups []int64) error {
	if err := checkSamples(labels, preds, weights); err != nil {
		return err
	}
	if len(groups) != len(labels) {
		return argError("groups: %d elements, labels has %d", len(groups), len(labels))
	}
	return capi.Metric_update_grouped(m.raw(), ptr(labels), ptr(preds), ptr(weights), ptr(groups),
		int64(len(labels)))
}

// Result is the metric over every sample so far.
func (m *Metric) Result() (float64, error) {
	var out float64
	err := capi.Metric_result(m.raw(), &out)
	return out, err
}

// Flags are the MetricFlag* bits of the last result.
func (m *Metric) Flags() int32 { return capi.Metric_flags(m.raw()) }

// Reset forgets every sample.
func (m *Metric) Reset() error { return capi.Metric_reset(m.raw()) }
