// The embedding and metric kernels against straightforward host
// references: bit-equal (fixed summation order, -fmad=false, shared
// optimizer formulas).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <string>

#include "abi/dtype.h"
#include "common/health.h"
#include "embedding/init.h"
#include "embedding/optimizer_math.h"
#include "gpu/context_state.h"
#include "gpu_test_util.h"

namespace {

using hb_test::DeviceBuffer;

constexpr int64_t kTimeoutMs = 60000;

class GpuKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    HB_REQUIRE_GPU();
    p_ = &hb::gpu::require_plugin();
    state_.reset(new hb::gpu::ContextState(*p_, 0, &health_));
    s_ = state_->stream();
  }
  template <class T>
  std::vector<T> download(const DeviceBuffer &b, size_t n) {
    std::vector<T> out(n);
    b.download(out.data(), n * sizeof(T), s_);
    state_->synchronize(kTimeoutMs);
    return out;
  }
  template <class Fn, class... Args>
  void call(const char *what, Fn fn, Args... args) {
    hb::gpu::plugin_call(what, fn, args..., s_);
  }
  std::vector<int64_t> random_ids(size_t n, int64_t range, uint32_t seed,
                                  bool negatives = false) {
    std::mt19937_64 rng(seed);
    std::vector<int64_t> ids(n);
    for (auto &id : ids) {
      id = static_cast<int64_t>(rng() % static_cast<uint64_t>(range));
      if (negatives && rng() % 5 == 0) id = -id - 1;
    }
    return ids;
  }
  std::vector<float> random_floats(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (auto &x : v) x = dist(rng);
    return v;
  }

  hb::Health health_;
  std::unique_ptr<hb::gpu::ContextState> state_;
  const hb_cuda_plugin *p_ = nullptr;
  void *s_ = nullptr;
};

TEST_F(GpuKernels, PartitionModAndDiv) {
  const int32_t world = 3;
  const int64_t rows_per_shard = 40;
  for (int32_t mode : {HB_CUDA_PARTITION_MOD, HB_CUDA_PARTITION_DIV}) {
    auto ids = random_ids(5000, 130, 1 + mode, /*negatives=*/true);
    DeviceBuffer dids(ids, s_), owner(ids.size() * 4), counts(world * 8),
        order(ids.size() * 8);
    call("emb_partition", p_->emb_partition, dids.get<const int64_t>(),
         ids.size(), world, mode, rows_per_shard, owner.get<int32_t>(),
         counts.get<int64_t>(), order.get<int64_t>());
    std::vector<int32_t> want_owner(ids.size());
    std::vector<int64_t> want_counts(world, 0), want_order;
    for (size_t i = 0; i < ids.size(); ++i) {
      int64_t id = ids[i];
      int32_t o = mode == HB_CUDA_PARTITION_MOD
                      ? static_cast<int32_t>(static_cast<uint64_t>(id) % world)
                      : (id >= 0 && id / rows_per_shard < world
                             ? int32_t(id / rows_per_shard)
                             : -1);
      want_owner[i] = o;
      if (o >= 0) ++want_counts[o];
    }
    for (int32_t o = 0; o <= world; ++o)  // stable, owner-less ids last
      for (size_t i = 0; i < ids.size(); ++i)
        if (want_owner[i] == o || (o == world && want_owner[i] < 0))
          want_order.push_back(int64_t(i));
    EXPECT_EQ(download<int32_t>(owner, ids.size()), want_owner)
        << "mode " << mode;
    EXPECT_EQ(download<int64_t>(counts, world), want_counts) << "mode " << mode;
    EXPECT_EQ(download<int64_t>(order, ids.size()), want_order)
        << "mode " << mode;
  }
}

TEST_F(GpuKernels, DedupAndSegmentSum) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{4097}}) {
    auto ids = random_ids(n, 300, 3, true);
    ids.push_back(INT64_MIN);  // extremes sort correctly as signed
    ids.push_back(INT64_MAX);
    n = ids.size();
    const int64_t dim = 5;
    auto grads = random_floats(n * dim, 4);
    DeviceBuffer dids(ids, s_), uniq(n * 8), inv(n * 8), num(8), order(n * 8),
        seg((n + 1) * 8);
    call("emb_dedup", p_->emb_dedup, dids.get<const int64_t>(), n,
         uniq.get<int64_t>(), inv.get<int64_t>(), num.get<int64_t>(),
         order.get<int64_t>(), seg.get<int64_t>());
    DeviceBuffer dgrads(grads, s_), sums(n * dim * 4);
    call("emb_segment_sum", p_->emb_segment_sum, dgrads.get<const float>(), dim,
         order.get<const int64_t>(), seg.get<const int64_t>(),
         num.get<const int64_t>(), n, sums.get<float>());
    // Host reference: ascending unique ids; for each, the positions in input
    // order, the gradient rows summed in that order.
    std::map<int64_t, std::vector<int64_t>> groups;
    for (size_t i = 0; i < n; ++i) groups[ids[i]].push_back(int64_t(i));
    std::vector<int64_t> want_unique, want_order, want_seg, want_inv(n);
    std::vector<float> want_sums;
    for (auto &g : groups) {
      want_seg.push_back(int64_t(want_order.size()));
      for (int64_t i : g.second) {
        want_inv[i] = int64_t(want_unique.size());
        want_order.push_back(i);
      }
      want_unique.push_back(g.first);
      for (int64_t d = 0; d < dim; ++d) {
        float acc = grads[g.second[0] * dim + d];
        for (size_t j = 1; j < g.second.size(); ++j)
          acc = acc + grads[g.second[j] * dim + d];
        want_sums.push_back(acc);
      }
    }
    want_seg.push_back(int64_t(n));
    size_t u = want_unique.size();
    ASSERT_EQ(download<int64_t>(num, 1)[0], int64_t(u));
    EXPECT_EQ(download<int64_t>(uniq, u), want_unique);
    EXPECT_EQ(download<int64_t>(inv, n), want_inv);
    EXPECT_EQ(download<int64_t>(order, n), want_order);
    EXPECT_EQ(download<int64_t>(seg, u + 1), want_seg);
    auto got = download<float>(sums, u * dim);
    EXPECT_EQ(0, std::memcmp(got.data(), want_sums.data(), got.size() * 4))
        << "bitwise sums";
  }
}

// The device plan's kernels (src/embedding/device_plan.h) give the host
// plan (src/embedding/plan.h), written out here: emb_dedup ->
// emb_first_occurrence -> emb_partition_bounded -> emb_send_slots, plus
// the range check and the owner's dense rows. (Self-contained: the
// standalone build of tests/gpu/run_gpu_tests.sh has no embedding code.)
TEST_F(GpuKernels, PlanKernelsGiveTheHostPlan) {
  const int64_t num_rows = 1000;
  for (int32_t world : {1, 3, 4})
    for (int32_t mode : {HB_CUDA_PARTITION_MOD, HB_CUDA_PARTITION_DIV})
      for (size_t n : {size_t{0}, size_t{1}, size_t{3000}}) {
        SCOPED_TRACE("world " + std::to_string(world) + " mode " +
                     std::to_string(mode) + " n " + std::to_string(n));
        const int64_t block = (num_rows + world - 1) / world;
        auto ids = random_ids(n, num_rows, 7 + world + mode);
        // Host plan: distinct ids in first-occurrence order, a stable
        // counting sort by owner, the send slot of every position.
        std::map<int64_t, int64_t> number;
        std::vector<int64_t> unique, inverse(n);
        for (size_t i = 0; i < n; ++i) {
          auto it = number.emplace(ids[i], int64_t(unique.size())).first;
          if (it->second == int64_t(unique.size())) unique.push_back(ids[i]);
          inverse[i] = it->second;
        }
        const size_t nu = unique.size();
        auto owner_of = [&](int64_t id) {
          return mode == HB_CUDA_PARTITION_DIV ? id / block : id % world;
        };
        std::vector<int64_t> counts(world, 0), send, pos(nu), slots_want(n),
            rows_want;
        for (int32_t p = 0; p < world; ++p)
          for (size_t u = 0; u < nu; ++u)
            if (owner_of(unique[u]) == p) {
              pos[u] = int64_t(send.size());
              send.push_back(unique[u]);
              ++counts[p];
            }
        for (size_t i = 0; i < n; ++i) slots_want[i] = pos[inverse[i]];
        for (int64_t id : unique)
          rows_want.push_back(mode == HB_CUDA_PARTITION_DIV ? id % block
                                                            : id / world);

        DeviceBuffer dids(ids, s_), inv(n * 8), num(8), order(n * 8),
            seg((n + 1) * 8), uniq(n * 8), finv(n * 8), owner(n * 4),
            dcounts(world * 8), porder(n * 8), dsend(n * 8), slots(n * 8),
            bad(8), rows(n * 8);
        call("emb_dedup", p_->emb_dedup, dids.get<const int64_t>(), n,
             static_cast<int64_t *>(nullptr), inv.get<int64_t>(),
             num.get<int64_t>(), order.get<int64_t>(), seg.get<int64_t>());
        call("emb_first_occurrence", p_->emb_first_occurrence,
             dids.get<const int64_t>(), n, inv.get<const int64_t>(),
             order.get<const int64_t>(), seg.get<const int64_t>(),
             uniq.get<int64_t>(), finv.get<int64_t>());
        call("emb_partition_bounded", p_->emb_partition_bounded,
             uniq.get<const int64_t>(), n, num.get<const int64_t>(), world,
             mode, block, owner.get<int32_t>(), dcounts.get<int64_t>(),
             porder.get<int64_t>());
        call("emb_send_slots", p_->emb_send_slots, uniq.get<const int64_t>(),
             porder.get<const int64_t>(), num.get<const int64_t>(),
             finv.get<const int64_t>(), n, dsend.get<int64_t>(),
             slots.get<int64_t>());
        call("emb_find_out_of_range", p_->emb_find_out_of_range,
             dids.get<const int64_t>(), n, num_rows, bad.get<int64_t>());
        call("emb_local_rows", p_->emb_local_rows, uniq.get<const int64_t>(), n,
             num.get<const int64_t>(), world, mode, block, rows.get<int64_t>());

        ASSERT_EQ(download<int64_t>(num, 1)[0], int64_t(nu));
        EXPECT_EQ(download<int64_t>(uniq, nu), unique);
        EXPECT_EQ(download<int64_t>(finv, n), inverse);
        EXPECT_EQ(download<int64_t>(dcounts, world), counts);
        EXPECT_EQ(download<int64_t>(dsend, nu), send);
        EXPECT_EQ(download<int64_t>(slots, n), slots_want);
        EXPECT_EQ(download<int64_t>(bad, 1)[0], int64_t(n));
        EXPECT_EQ(download<int64_t>(rows, nu), rows_want);
        if (n > 2) {  // the first out-of-range position, in input order
          ids[n / 2] = num_rows;
          ids[n - 1] = -1;
          DeviceBuffer dbad(ids, s_);
          call("emb_find_out_of_range", p_->emb_find_out_of_range,
               dbad.get<const int64_t>(), n, num_rows, bad.get<int64_t>());
          EXPECT_EQ(download<int64_t>(bad, 1)[0], int64_t(n / 2));
        }
      }
}

TEST_F(GpuKernels, GatherRows) {
  const int64_t rows = 50, dim = 7;
  auto table = random_floats(rows * dim, 5);
  std::vector<int64_t> idx = {0, 49, 3, 3, -1, 50, 12};
  DeviceBuffer dt(table, s_), di(idx, s_), out(idx.size() * dim * 4);
  call("emb_gather", p_->emb_gather, dt.get<const float>(), rows, dim, dim,
       di.get<const int64_t>(), idx.size(), out.get<float>());
  std::vector<float> want;
  for (int64_t r : idx)
    for (int64_t d = 0; d < dim; ++d)
      want.push_back(r >= 0 && r < rows ? table[r * dim + d] : 0.0f);
  auto got = download<float>(out, want.size());
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * 4));
}

// Wire rounding on the device against the host's (abi/dtype.h): ties,
// subnormals, overflow, infinities, NaN and random values, both dtypes.
TEST_F(GpuKernels, WireRoundingMatchesHost) {
  std::vector<float> v = random_floats(4096, 9);
  for (float x : {0.0f, -0.0f, 1.0f, 65504.0f, 65520.0f, 1e30f, -1e-30f,
                  5.96e-8f, 2.98e-8f, 6.1e-5f, 1.0009765625f, 1.00048828125f,
                  std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::denorm_min()})
    v.push_back(x);
  DeviceBuffer dv(v, s_), bits(v.size() * 2), back(v.size() * 4);
  for (hb_dtype d : {HB_FLOAT16, HB_BFLOAT16}) {
    call("emb_wire_encode", p_->emb_wire_encode, dv.get<const float>(),
         v.size(), static_cast<int32_t>(d), bits.get<uint16_t>());
    call("emb_wire_decode", p_->emb_wire_decode, bits.get<const uint16_t>(),
         v.size(), static_cast<int32_t>(d), back.get<float>());
    auto got_bits = download<uint16_t>(bits, v.size());
    auto got = download<float>(back, v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      uint16_t want =
          d == HB_FLOAT16 ? hb::float_to_half(v[i]) : hb::float_to_bf16(v[i]);
      float wf =
          d == HB_FLOAT16 ? hb::half_to_float(want) : hb::bf16_to_float(want);
      ASSERT_EQ(got_bits[i], want) << "dtype " << d << " value " << v[i];
      ASSERT_EQ(0, std::memcmp(&got[i], &wf, 4)) << "dtype " << d;
    }
  }
}

// Three steps of each optimizer on row records laid out as the CPU shard's
// (some rows touched in every step, odd dim so Adam's step count is not
// 8-byte aligned), compared bit for bit with the host formulas.
TEST_F(GpuKernels, OptimizersMatchHostBitForBit) {
  const int64_t rows = 64, dim = 33;  // dim > 32: lanes loop over columns
  for (int32_t kind : {HB_OPT_SGD, HB_OPT_ADAGRAD, HB_OPT_ADAM, HB_OPT_FTRL}) {
    for (double lr_power : {-0.5, -0.3}) {
      if (kind != HB_OPT_FTRL && lr_power != -0.5) continue;
      hb_cuda_optimizer opt = {kind, 0.05,  0.1,  0.9,     0.999,
                               1e-7, 0.001, 0.01, lr_power};
      hb::optmath::Hyper h = hb::optmath::make_hyper(
          opt.learning_rate, opt.epsilon, opt.initial_accumulator, opt.beta1,
          opt.beta2, opt.l1, opt.l2, opt.lr_power);
      const int64_t words = hb::optmath::record_words(kind, dim);
      auto records = random_floats(rows * words, 6);
      for (int64_t r = 0; r < rows; ++r) {
        float *rec = &records[r * words];
        for (int64_t c = dim; c < 3 * dim && c < words; ++c)
          rec[c] = std::fabs(rec[c]);  // accumulators must be >= 0
        if (kind == HB_OPT_ADAM) hb::optmath::set_record_steps(rec, dim, r % 4);
      }
      DeviceBuffer drec(records, s_);
      for (int step = 0; step < 3; ++step) {
        std::vector<int64_t> touched = {
            int64_t(step), 5, 63, 17 + step, 40, -1, 64};
        auto grads = random_floats(touched.size() * dim, 10 + step);
        std::vector<int64_t> num = {int64_t(touched.size())};
        DeviceBuffer drows(touched, s_), dnum(num, s_), dgrads(grads, s_);
        call("emb_apply", p_->emb_apply,
             static_cast<const hb_cuda_optimizer *>(&opt), drec.get<float>(),
             words, rows, dim, drows.get<const int64_t>(),
             dnum.get<const int64_t>(), touched.size(),
             dgrads.get<const float>());
        for (size_t k = 0; k < touched.size(); ++k) {
          int64_t r = touched[k];
          if (r < 0 || r >= rows) continue;  // out of range rows are skipped
          float *rec = &records[r * words];
          int64_t t =
              kind == HB_OPT_ADAM ? hb::optmath::record_steps(rec, dim) + 1 : 0;
          float lr_t = kind == HB_OPT_ADAM ? hb::optmath::adam_lr(h, t) : 0.0f;
          for (int64_t c = 0; c < dim; ++c)
            hb::optmath::step_element(kind, rec, dim, c, grads[k * dim + c],
                                      lr_t, h);
          if (kind == HB_OPT_ADAM) hb::optmath::set_record_steps(rec, dim, t);
        }
      }
      auto got = download<float>(drec, records.size());
      bool powf_used = kind == HB_OPT_FTRL && lr_power != -0.5;
      for (size_t i = 0; i < records.size(); ++i) {
        if (powf_used) {  // powf's last bit may differ between libm and CUDA
          ASSERT_NEAR(got[i], records[i], 1e-5f * (1 + std::fabs(records[i])))
              << i;
          continue;
        }
        ASSERT_EQ(0, std::memcmp(&got[i], &records[i], 4))
            << "optimizer " << kind << " word " << i << " (row " << i / words
            << ", column " << i % words << "): " << got[i] << " vs "
            << records[i];
      }
    }
  }
}

TEST_F(GpuKernels, AucHistogram) {
  const int32_t nt = 200;
  std::vector<float> thresholds(nt);
  thresholds[0] = -1e-7f;
  for (int i = 1; i < nt - 1; ++i) thresholds[i] = float(double(i) / (nt - 1));
  thresholds[nt - 1] = 1.0f + 1e-7f;
  size_t n = 20000;
  auto preds = random_floats(n, 11), weights = random_floats(n, 12);
  for (auto &p : preds) p = std::fabs(p);
  preds[0] = 0.0f, preds[1] = 1.0f,
  preds[2] = thresholds[57];  // on a threshold: not above it
  std::vector<float> labels(n);
  for (size_t i = 0; i < n; ++i) labels[i] = (i * 7919) % 3 == 0 ? 1.0f : 0.0f;
  std::vector<uint64_t> want_pos(nt + 1, 0), want_neg(nt + 1, 0);
  std::vector<double> want_wpos(nt + 1, 0.0), want_wneg(nt + 1, 0.0);
  // Start from nonzero state: the kernel adds to what is there (batches).
  std::vector<uint64_t> init_counts(nt + 1, 3);
  std::vector<double> init_w(nt + 1, 0.25);
  std::vector<std::vector<float>> per_bucket_w[2];
  per_bucket_w[0].resize(nt + 1), per_bucket_w[1].resize(nt + 1);
  for (size_t i = 0; i < n; ++i) {
    int b = int(std::upper_bound(thresholds.begin(), thresholds.end(), preds[i],
                                 [](float p, float t) { return !(p > t); }) -
                thresholds.begin());
    bool pos = labels[i] != 0.0f;
    (pos ? want_pos : want_neg)[b] += 1;
    per_bucket_w[pos][b].push_back(weights[i]);
  }
  for (int c = 0; c < 2; ++c)
    for (int b = 0; b <= nt; ++b) {
      double acc = 0.0;
      for (float w : per_bucket_w[c][b]) acc += double(w);
      (c ? want_wpos : want_wneg)[b] = 0.25 + acc;
    }
  for (int b = 0; b <= nt; ++b) want_pos[b] += 3, want_neg[b] += 3;
  DeviceBuffer dl(labels, s_), dp(preds, s_), dw(weights, s_),
      pos(init_counts, s_), neg(init_counts, s_), wpos(init_w, s_),
      wneg(init_w, s_);
  call("auc_histogram", p_->auc_histogram, dl.get<const float>(),
       dp.get<const float>(), dw.get<const float>(), n,
       static_cast<const float *>(thresholds.data()), nt, pos.get<uint64_t>(),
       neg.get<uint64_t>(), wpos.get<double>(), wneg.get<double>());
  EXPECT_EQ(download<uint64_t>(pos, nt + 1), want_pos);
  EXPECT_EQ(download<uint64_t>(neg, nt + 1), want_neg);
  auto gw = download<double>(wpos, nt + 1), gn = download<double>(wneg, nt + 1);
  EXPECT_EQ(0, std::memcmp(gw.data(), want_wpos.data(), gw.size() * 8))
      << "weighted positives";
  EXPECT_EQ(0, std::memcmp(gn.data(), want_wneg.data(), gn.size() * 8))
      << "weighted negatives";
}

TEST_F(GpuKernels, IntegerAverageDivision) {
  std::vector<int32_t> v = {7, -7, 9, -9, 0, 2147483647};
  DeviceBuffer d(v, s_);
  call("divide_async", p_->divide_async, d.get(), v.size(), int32_t(HB_INT32),
       int64_t(2));
  std::vector<int32_t> want;
  for (int32_t x : v) want.push_back(x / 2);  // truncates toward zero
  EXPECT_EQ(download<int32_t>(d, v.size()), want);
}

// ---- Device id -> row map of dynamic tables (cuda/id_map_kernels.cu) -----

// The host shard's rule: new ids get the next rows as first met.
struct SequentialMap {
  std::map<int64_t, int64_t> row;
  std::vector<int64_t> ids;
  std::vector<int64_t> assign(const std::vector<int64_t> &in, size_t k) {
    std::vector<int64_t> out;
    for (size_t i = 0; i < k; ++i) {
      auto it = row.emplace(in[i], static_cast<int64_t>(ids.size())).first;
      if (it->second == static_cast<int64_t>(ids.size())) ids.push_back(in[i]);
      out.push_back(it->second);
    }
    return out;
  }
};

class GpuIdMap : public GpuKernels {
 protected:
  // A map of `capacity` slots with row_capacity rows, built from `rows`.
  void make(int64_t capacity, int64_t row_capacity,
            const std::vector<int64_t> &rows) {
    capacity_ = capacity;
    row_capacity_ = row_capacity;
    keys_.reset(new DeviceBuffer((capacity + 1) * 8));
    vals_.reset(new DeviceBuffer((capacity + 1) * 8));
    std::vector<int64_t> ids(row_capacity, 0);
    std::copy(rows.begin(), rows.end(), ids.begin());
    row_ids_.reset(new DeviceBuffer(ids, s_));
    const std::vector<int64_t> counts = {static_cast<int64_t>(rows.size()), 0};
    counts_.reset(new DeviceBuffer(counts, s_));
    call("emb_idmap_build", p_->emb_idmap_build, keys_->get<int64_t>(),
         vals_->get<int64_t>(), capacity, row_ids_->get<const int64_t>(),
         static_cast<int64_t>(rows.size()));
  }
  // Assigns ids[0..k) (k < n: through a device count); returns the rows
  // and sets *num_rows / *first_new.
  std::vector<int64_t> assign(const std::vector<int64_t> &ids, size_t k,
                              int64_t *num_rows, int64_t *first_new) {
    DeviceBuffer d(ids, s_), out(ids.size() * 8 + 8),
        dk(std::vector<int64_t>{static_cast<int64_t>(k)}, s_);
    call("emb_idmap_assign", p_->emb_idmap_assign, keys_->get<int64_t>(),
         vals_->get<int64_t>(), capacity_, d.get<const int64_t>(), ids.size(),
         k < ids.size() ? dk.get<const int64_t>() : nullptr,
         row_ids_->get<int64_t>(), row_capacity_, counts_->get<int64_t>(),
         counts_->get<int64_t>() + 1, out.get<int64_t>());
    auto c = download<int64_t>(*counts_, 2);
    *num_rows = c[0];
    *first_new = c[1];
    return download<int64_t>(out, k);
  }
  int64_t capacity_ = 0, row_capacity_ = 0;
  std::unique_ptr<DeviceBuffer> keys_, vals_, row_ids_, counts_;
};

TEST_F(GpuIdMap, NewIdsGetRowsInFirstOccurrenceOrder) {
  make(8192, 4096, {});
  SequentialMap want;
  for (uint32_t round = 0; round < 6; ++round) {
    // Duplicate-heavy, negatives, the empty-key marker and INT64_MAX.
    auto ids = random_ids(3000, 1500 + 200 * round, 40 + round, true);
    ids[7] = ids[2900] = std::numeric_limits<int64_t>::min();
    ids[11] = std::numeric_limits<int64_t>::max();
    const size_t k = round == 3 ? 1234 : ids.size();  // a device bound
    const int64_t before = static_cast<int64_t>(want.ids.size());
    int64_t num_rows = 0, first_new = 0;
    auto rows = assign(ids, k, &num_rows, &first_new);
    EXPECT_EQ(rows, want.assign(ids, k)) << "round " << round;
    EXPECT_EQ(num_rows, static_cast<int64_t>(want.ids.size()));
    EXPECT_EQ(first_new, before);
    EXPECT_EQ(download<int64_t>(*row_ids_, want.ids.size()), want.ids);
  }
  // A rehash into a larger table from row_ids maps every id to its row.
  const std::vector<int64_t> all = want.ids;
  make(16384, 4096, all);
  int64_t num_rows = 0, first_new = 0;
  auto rows = assign(all, all.size(), &num_rows, &first_new);
  std::vector<int64_t> iota(all.size());
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(rows, iota);
  EXPECT_EQ(num_rows, static_cast<int64_t>(all.size()));
  EXPECT_EQ(first_new, num_rows);
}

TEST_F(GpuIdMap, NoRoomIsReportedInTheCount) {
  int64_t num_rows = 0, first_new = 0;
  // row_ids full: 4 rows of room, 10 new ids.
  make(64, 4, {});
  std::vector<int64_t> ids(10);
  std::iota(ids.begin(), ids.end(), 100);
  auto rows = assign(ids, ids.size(), &num_rows, &first_new);
  EXPECT_EQ(num_rows, -1);
  EXPECT_EQ(rows, std::vector<int64_t>(ids.size(), -1));
  // The table full: 16 slots, 20 distinct ids.
  make(16, 64, {});
  ids.resize(20);
  std::iota(ids.begin(), ids.end(), -5);
  rows = assign(ids, ids.size(), &num_rows, &first_new);
  EXPECT_EQ(num_rows, -1);
  EXPECT_EQ(rows, std::vector<int64_t>(ids.size(), -1));
  // Bad capacities are refused.
  std::string msg;
  EXPECT_EQ(
      hb::gpu::plugin_try(&msg, p_->emb_idmap_build, keys_->get<int64_t>(),
                          vals_->get<int64_t>(), int64_t{24},
                          row_ids_->get<const int64_t>(), int64_t{0}, s_),
      HB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("power of two"), std::string::npos) << msg;
}

// New rows initialized on the device equal the host shard's: weights
// bit-equal for zeros / constant / uniform, normal within 1 ulp (CUDA's
// log and cos against glibc's); optimizer slots bit-equal.
TEST_F(GpuIdMap, InitRowsMatchTheHostInitializer) {
  const int64_t dim = 37, rows = 300, first = 5, end = 5 + 250;
  std::vector<int64_t> ids = random_ids(rows, 1LL << 40, 9, true);
  ids[6] = std::numeric_limits<int64_t>::min();
  DeviceBuffer dids(ids, s_), range(std::vector<int64_t>{first, end}, s_);
  for (int32_t opt : {HB_OPT_SGD, HB_OPT_ADAGRAD, HB_OPT_ADAM, HB_OPT_FTRL})
    for (int32_t kind :
         {HB_INIT_ZEROS, HB_INIT_CONSTANT, HB_INIT_UNIFORM, HB_INIT_NORMAL}) {
      hb::emb::Spec spec;
      spec.name = "init";
      spec.dim = dim;
      spec.initializer = kind;
      spec.init_a = kind == HB_INIT_NORMAL ? 0.5 : -0.125;
      spec.init_b = kind == HB_INIT_NORMAL ? 0.2 : 0.375;
      spec.seed = 1234;
      spec.optimizer = opt;
      spec.initial_accumulator = 0.1;
      const uint64_t name_hash = 77;
      const int64_t words = hb::optmath::record_words(opt, dim);
      hb_cuda_init init = {};
      init.initializer = kind;
      init.optimizer = opt;
      init.dim = dim;
      init.init_a = spec.init_a;
      init.init_b = spec.init_b;
      init.table_key = hb::emb::init_params(spec, name_hash).table_key;
      init.initial_accumulator = spec.initial_accumulator;
      std::vector<float> garbage(rows * words, -9.0f);
      DeviceBuffer rec(garbage, s_);
      // max_rows caps the range: rows first .. first + 200.
      call("emb_init_rows", p_->emb_init_rows,
           static_cast<const hb_cuda_init *>(&init), rec.get<float>(), words,
           rows, dids.get<const int64_t>(), range.get<const int64_t>(),
           range.get<const int64_t>() + 1, size_t{200});
      auto got = download<float>(rec, garbage.size());
      std::vector<float> want = garbage;
      for (int64_t r = first; r < first + 200; ++r) {
        float *w = want.data() + r * words;
        hb::emb::init_row(spec, name_hash, ids[r], w);
        hb::optmath::init_slots(opt, w, dim,
                                static_cast<float>(spec.initial_accumulator));
      }
      int64_t ulp1 = 0, worse = 0;
      for (size_t e = 0; e < want.size(); ++e) {
        uint32_t a, b;
        std::memcpy(&a, &got[e], 4);
        std::memcpy(&b, &want[e], 4);
        if (a == b) continue;
        bool weight = static_cast<int64_t>(e % words) < dim;
        if (kind == HB_INIT_NORMAL && weight && (a - b == 1 || b - a == 1))
          ++ulp1;
        else
          ++worse;
      }
      EXPECT_EQ(worse, 0) << "initializer " << kind << " optimizer " << opt;
      if (ulp1)
        std::printf("initializer normal: %lld weights 1 ulp off\n",
                    static_cast<long long>(ulp1));
    }
}

// The collection kernels (cuda/collection_kernels.cu) against the host
// collection's loops (src/embedding/collection.cc), written out here:
// bags from offsets and lengths with their errors, pooling and gradient
// shares for every pooling mode (hb_pooling_code 0-3) with and without
// weights, empty bags included, bit for bit; the id comparison.
TEST_F(GpuKernels, CollectionKernelsMatchTheHostCollection) {
  if (!HB_CUDA_PLUGIN_HAS(p_, emb_ids_equal))
    GTEST_SKIP() << "the plugin has no collection kernels";
  const int64_t B = 37, dim = 5, base = 3;
  std::mt19937 rng(11);
  std::vector<int64_t> lengths(B), offsets(B + 1, base), bag(B + 1, 0);
  for (int64_t b = 0; b < B; ++b) {
    lengths[b] = b % 6 == 2 ? 0 : rng() % 5;
    offsets[b + 1] = offsets[b] + lengths[b];
    bag[b + 1] = bag[b] + lengths[b];
  }
  const size_t n = static_cast<size_t>(bag[B]);
  // Bags: from offsets (starting at `base`) and from lengths.
  DeviceBuffer doff(offsets, s_), dlen(lengths, s_), dbag((B + 1) * 8),
      info(5 * 8);
  for (int from_lengths = 0; from_lengths < 2; ++from_lengths) {
    call("emb_bags", p_->emb_bags,
         from_lengths ? nullptr : doff.get<const int64_t>(),
         dlen.get<const int64_t>(), B, dbag.get<int64_t>(),
         info.get<int64_t>());
    EXPECT_EQ(download<int64_t>(dbag, B + 1), bag);
    EXPECT_EQ(
        download<int64_t>(info, 5),
        (std::vector<int64_t>{int64_t(n), from_lengths ? 0 : base, 0, 0, 0}));
  }
  // The first error in sample order: {kind, sample, value}.
  auto bad = [&](std::vector<int64_t> arr, bool is_offsets) {
    DeviceBuffer d(arr, s_);
    call("emb_bags", p_->emb_bags,
         is_offsets ? d.get<const int64_t>() : nullptr,
         is_offsets ? nullptr : d.get<const int64_t>(), B, dbag.get<int64_t>(),
         info.get<int64_t>());
    auto e = download<int64_t>(info, 5);
    return std::vector<int64_t>(e.begin() + 2, e.end());
  };
  std::vector<int64_t> o2 = offsets, l2 = lengths, o3 = offsets;
  o2[5] = o2[4] - 1, o2[9] = 0;
  l2[7] = -1, l2[20] = int64_t{1} << 32;
  o3[0] = -5;
  EXPECT_EQ(bad(o2, true), (std::vector<int64_t>{2, 4, 0}));
  EXPECT_EQ(bad(l2, false), (std::vector<int64_t>{3, 7, -1}));
  EXPECT_EQ(bad(o3, true), (std::vector<int64_t>{1, 0, -5}));

  // Pooling and gradient shares.
  const int64_t nrows = 9, stride = dim + 4;
  auto rows = random_floats(nrows * dim, 12),
       grad = random_floats(B * stride, 13), w = random_floats(n, 14),
       ugrad = random_floats(n * dim, 15);
  std::vector<int64_t> slot(n);
  for (auto &x : slot) x = rng() % nrows;
  DeviceBuffer drows(rows, s_), dgrad(grad, s_), dw(w, s_), dugrad(ugrad, s_),
      dslot(slot, s_), out((std::max<size_t>(B * stride, n * dim) + 1) * 4),
      per_id(n * dim * 4 + 4);
  call("emb_bags", p_->emb_bags, doff.get<const int64_t>(),
       static_cast<const int64_t *>(nullptr), B, dbag.get<int64_t>(),
       info.get<int64_t>());
  for (int32_t pooling = 0; pooling <= 3; ++pooling)
    for (bool weighted : {false, true}) {
      SCOPED_TRACE("pooling " + std::to_string(pooling) +
                   (weighted ? " weighted" : ""));
      const float *wp = weighted ? dw.get<const float>() : nullptr;
      auto wt = [&](size_t k) { return weighted ? w[k] : 1.0f; };
      std::vector<float> want_out(pooling ? B * stride : n * dim, 0.0f),
          want_grad(n * dim);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t k = bag[b]; k < bag[b + 1]; ++k)
          for (int64_t c = 0; c < dim; ++c) {
            const float r = rows[slot[k] * dim + c];
            const float v = weighted ? w[k] * r : r;
            const int64_t cnt = bag[b + 1] - bag[b];
            const float d = pooling == 2 ? static_cast<float>(cnt)
                                         : std::sqrt(static_cast<float>(cnt));
            if (pooling == 0) {
              want_out[k * dim + c] = v;
              const float g = ugrad[k * dim + c];
              want_grad[k * dim + c] = weighted ? g * w[k] : g;
              continue;
            }
            float &o = want_out[b * stride + c];
            o = k == bag[b] ? v : o + v;
            if (k + 1 == bag[b + 1] && pooling > 1) o = o / d;
            const float g = grad[b * stride + c];
            float sc = wt(k);
            if (pooling > 1) sc = sc / d;
            want_grad[k * dim + c] = pooling == 1 && !weighted ? g : g * sc;
          }
      // out starts as garbage: every written element must be set.
      std::vector<float> junk(std::max<size_t>(B * stride, n * dim) + 1, -7.0f);
      out.upload(junk.data(), junk.size() * 4, s_);
      call("emb_pool", p_->emb_pool, drows.get<const float>(), dim,
           dslot.get<const int64_t>(), wp, n, dbag.get<const int64_t>(), B,
           pooling, out.get<float>(), pooling ? stride : dim);
      call("emb_expand_grads", p_->emb_expand_grads,
           pooling ? dgrad.get<const float>() : dugrad.get<const float>(),
           pooling ? stride : dim, dim, wp, n, dbag.get<const int64_t>(), B,
           pooling, per_id.get<float>());
      auto got = download<float>(out, want_out.size());
      for (size_t i = 0; i < want_out.size(); ++i)
        if (pooling && int64_t(i % stride) >= dim) got[i] = 0.0f;  // padding
      EXPECT_EQ(0, std::memcmp(got.data(), want_out.data(), got.size() * 4));
      auto gg = download<float>(per_id, n * dim);
      EXPECT_EQ(0, std::memcmp(gg.data(), want_grad.data(), gg.size() * 4));
    }

  // ids_equal: the flag is set by a difference and left alone otherwise.
  auto a = random_ids(1000, 50, 3), b2 = a;
  b2[777] += 1;
  DeviceBuffer da(a, s_), db(b2, s_), flag(8);
  std::vector<int64_t> zero = {0};
  flag.upload(zero.data(), 8, s_);
  call("emb_ids_equal", p_->emb_ids_equal, da.get<const int64_t>(),
       da.get<const int64_t>(), a.size(), flag.get<int64_t>());
  EXPECT_EQ(download<int64_t>(flag, 1)[0], 0);
  call("emb_ids_equal", p_->emb_ids_equal, da.get<const int64_t>(),
       db.get<const int64_t>(), a.size(), flag.get<int64_t>());
  EXPECT_EQ(download<int64_t>(flag, 1)[0], 1);
}

}  // namespace
