package hb

import "hb.dev/hb/internal/capi"

// Job checkpoints (hb_checkpoint, EXPERIMENTAL in hb.h; see
// docs/fault-tolerance.md): the tables, readers and metrics of a training
// job, consistent across ranks and atomic. Serving and evaluator programs
// follow a job with LatestCheckpoint (no context) and load its state with
// RestoreLatest / Restore. (Dense buffers are not offered here: cgo forbids
// C from keeping pointers to Go memory.)

// CheckpointConfig mirrors hb_checkpoint_config; empty Dir / nil JobID take
// the options checkpoint_dir / checkpoint_job_id.
type CheckpointConfig struct {
	Dir        string
	JobID      *string
	Keep       int32 // 0: 3
	AsyncWrite bool
	TimeoutMs  int64
}

// Checkpoint is a job's checkpoint directory with what is registered.
type Checkpoint struct {
	handle
	kept []interface{} // registered handles, alive as long as this one
}

// LatestCheckpoint returns the newest complete checkpoint in dir: its
// directory and step, or "" and -1 when there is none.
func LatestCheckpoint(dir string) (string, int64, error) {
	var path string
	var step int64
	if err := capi.Hb_checkpoint_latest(dir, &path, &step); err != nil {
		return "", -1, err
	}
	return path, step, nil
}

// NewCheckpoint opens (or creates) the job's checkpoint directory:
// collective.
func NewCheckpoint(c *Context, config CheckpointConfig) (*Checkpoint, error) {
	n := capi.NewCheckpoint_config()
	defer capi.DeleteCheckpoint_config(n)
	if config.Dir != "" {
		n.SetDir(config.Dir)
	}
	if config.JobID != nil {
		n.SetJob_id(*config.JobID)
	}
	if config.Keep != 0 {
		n.SetKeep(config.Keep)
	}
	if config.AsyncWrite {
		n.SetAsync_write(1)
	}
	n.SetTimeout_ms(config.TimeoutMs)
	k := &Checkpoint{}
	if err := capi.Checkpoint_create(c.raw(), n, &k.h); err != nil {
		return nil, err
	}
	return k, nil
}

func (k *Checkpoint) raw() uintptr { return k.get("Checkpoint") }

// Close waits for a pending save and frees the handle; closing twice is fine.
func (k *Checkpoint) Close() error {
	k.close(capi.Checkpoint_destroy)
	k.kept = nil
	return nil
}

// AddPSDense registers a dense buffer on the ps tasks (values and
// optimizer slots).
func (k *Checkpoint) AddPSDense(d *PSDense) error {
	if err := capi.Checkpoint_add_ps_dense(k.raw(), d.raw()); err != nil {
		return err
	}
	k.kept = append(k.kept, d)
	return nil
}

// AddTable registers a table (rows and optimizer slots).
func (k *Checkpoint) AddTable(e *Embedding) error {
	if err := capi.Checkpoint_add_table(k.raw(), e.raw()); err != nil {
		return err
	}
	k.kept = append(k.kept, e)
	return nil
}

// AddMetric registers a metric's streaming state.
func (k *Checkpoint) AddMetric(name string, m *Metric) error {
	if err := capi.Checkpoint_add_metric(k.raw(), name, m.raw()); err != nil {
		return err
	}
	k.kept = append(k.kept, m)
	return nil
}

// AddReader registers a reader's position.
func (k *Checkpoint) AddReader(r *Reader) error {
	if err := capi.Checkpoint_add_reader(k.raw(), r.raw()); err != nil {
		return err
	}
	k.kept = append(k.kept, r)
	return nil
}

// SetMeta sets metadata saved with the next checkpoint.
func (k *Checkpoint) SetMeta(key, value string) error {
	return capi.Checkpoint_set_meta(k.raw(), key, value)
}

// Meta returns the value of key (after a restore: the checkpoint's).
func (k *Checkpoint) Meta(key string) (string, error) {
	var v string
	err := capi.Hb_checkpoint_get_meta(k.raw(), key, &v)
	return v, err
}

// Save writes one checkpoint tagged step: collective, at a step boundary.
func (k *Checkpoint) Save(step int64) error { return capi.Checkpoint_save(k.raw(), step) }

// Wait waits until the last save is committed on every rank.
func (k *Checkpoint) Wait() error { return capi.Checkpoint_wait(k.raw()) }

// RestoreLatest restores the newest complete checkpoint (collective): its
// step, or -1 for a fresh start.
func (k *Checkpoint) RestoreLatest() (int64, error) {
	var step int64
	err := capi.Checkpoint_restore_latest(k.raw(), &step)
	return step, err
}

// Restore restores the checkpoint at path (collective): its step.
func (k *Checkpoint) Restore(path string) (int64, error) {
	var step int64
	err := capi.Checkpoint_restore(k.raw(), path, &step)
	return step, err
}

// RestoredPath is the checkpoint the last restore used ("" when none).
func (k *Checkpoint) RestoredPath() (string, error) {
	var p string
	err := capi.Hbw_checkpoint_restored_path(k.raw(), &p)
	return p, err
}
