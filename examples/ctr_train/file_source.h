// The demo's train data from Criteo-format files (--data 'glob', e.g. as
// written by criteo_synth_tsv) through hb_reader: sharded over the ranks,
// parsed ahead on background threads. Turns each batch back into
// synth::Sample rows (one id per table; an empty field reads as id 0) and
// keeps the time the training loop waited for input.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <time.h>

#include "hb.h"
#include "synth_data.h"

class FileSource {
 public:
  FileSource(hb_context *ctx, const std::string &glob, int64_t batch) {
    hb_reader_config cfg = HB_READER_CONFIG_INIT;
    cfg.batch_size = batch;
    cfg.num_threads = 2;
    const char *paths[] = {glob.c_str()};
    check(hb_reader_create(ctx, paths, 1, &cfg, &reader_), "hb_reader_create");
  }
  ~FileSource() {
    hb_reader_batch_free(batch_);
    hb_reader_destroy(reader_);
  }

  // The next batch of this rank; false when it is out of data.
  bool fetch() {
    hb_reader_batch_free(batch_);
    batch_ = nullptr;
    double t0 = now();
    check(hb_reader_next(reader_, &batch_), "hb_reader_next");
    wait_s_ += now() - t0;
    return batch_ != nullptr;
  }
  int64_t size() const { return batch_ ? batch_->size : 0; }

  // The fetched batch as samples (planted_prob is unknown: 0).
  void samples(std::vector<synth::Sample> *out) const {
    const int64_t n = size();
    out->resize(n);
    for (int64_t i = 0; i < n; ++i) {
      synth::Sample &s = (*out)[i];
      s.label = batch_->labels[i];
      s.planted_prob = 0;
      for (int j = 0; j < synth::kDense; ++j)
        s.dense[j] = batch_->dense[i * batch_->num_dense + j];
      for (int t = 0; t < synth::kTables; ++t) {
        const int64_t *o = batch_->offsets + t * n + i;
        s.ids[t] = o[1] > o[0] ? batch_->ids[o[0]] : 0;
      }
    }
  }

  double wait_s() const { return wait_s_; }
  hb_reader *reader() const { return reader_; }
  uint64_t lines() const { return hb_reader_lines(reader_); }

 private:
  static double now() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
  }
  static void check(hb_status st, const char *what) {
    if (st == HB_OK) return;
    std::fprintf(stderr, "ctr_train: %s: %s: %s\n", what, hb_status_name(st),
                 hb_last_error());
    std::exit(1);
  }

  hb_reader *reader_ = nullptr;
  hb_reader_batch *batch_ = nullptr;
  double wait_s_ = 0;
};
