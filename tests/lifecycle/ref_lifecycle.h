// An independent single-process model of a table with a lifecycle, written
// from docs/table-lifecycle.md: the update step, per-step counting and
// admission, the boundary's age / norm / capacity rules with (score, id)
// order, and the Bloom filter's documented cells. The row arithmetic is
// the embedding tests' RefTable (bit-exact with the tables).
#pragma once

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "embedding/reference.h"

namespace hbtest {

using StepBatch =
    std::vector<std::pair<std::vector<int64_t>, std::vector<float>>>;

struct RefLife {
  RefTable t;  // t.rows: the live rows
  hb_embedding_lifecycle lc;
  int world;  // only the Bloom filter depends on it
  uint64_t step = 0;
  struct State {
    uint64_t last;
    uint32_t updates;
  };
  std::map<int64_t, State> st;
  struct Count {
    uint32_t count;
    uint64_t last_seen;
  };
  std::map<int64_t, Count> counts;
  std::vector<std::vector<uint8_t>> bloom;  // per owner rank
  uint64_t admitted = 0, dropped = 0, ev_ttl = 0, ev_l2 = 0, ev_cap = 0;
  std::vector<int64_t> evicted;  // in boundary order, ascending per boundary

  RefLife(const hb_embedding_config &c, const hb_embedding_lifecycle &l,
          int world_size)
      : t(c), lc(l), world(world_size) {
    if (counting() && lc.admission == HB_ADMIT_BLOOM) {
      int64_t m = std::max<int64_t>(64, lc.bloom_bytes / world);
      bloom.assign(world, std::vector<uint8_t>(m, 0));
    }
  }
  bool counting() const {
    return lc.admission != HB_ADMIT_ALL && lc.min_count > 1;
  }
  int hashes() const {
    int k = (int)std::lround(-std::log2(lc.bloom_fpr));
    return std::min(16, std::max(1, k));
  }
  std::vector<uint64_t> cells(int64_t id) const {
    uint64_t a = ref_splitmix((uint64_t)id ^ 0xB10011ull);
    uint64_t b = ref_splitmix(a ^ 0x5EED5EEDull) | 1;
    uint64_t m = bloom[0].size();
    std::vector<uint64_t> out;
    for (int i = 0; i < hashes(); ++i) out.push_back((a + i * b) % m);
    return out;
  }
  int owner(int64_t id) const { return (int)((uint64_t)id % (uint64_t)world); }

  std::vector<float> lookup(int64_t id) {
    auto it = t.rows.find(id);
    std::vector<float> out(t.c.dim);
    for (int64_t k = 0; k < t.c.dim; ++k)
      out[k] = it != t.rows.end() ? it->second.w[k]
               : counting()       ? lc.default_value
                                  : t.init_value(id, k);
    for (float &v : out) v = ref_wire(v, t.c.wire_dtype);
    return out;
  }

  void apply(const StepBatch &batch) {
    ++step;
    std::vector<std::pair<int64_t, std::vector<float>>> fresh;
    for (auto &kv : t.sums(batch)) {
      if (t.rows.count(kv.first)) {
        t.step(t.row(kv.first), kv.second);
        st[kv.first].last = step;
        ++st[kv.first].updates;
      } else {
        fresh.push_back(kv);
      }
    }
    if (counting()) {
      for (auto &kv : fresh) {
        if (lc.admission == HB_ADMIT_COUNT) {
          Count &c = counts[kv.first];
          ++c.count;
          c.last_seen = step;
        } else {
          for (uint64_t cell : cells(kv.first)) {
            uint8_t &v = bloom[owner(kv.first)][cell];
            if (v < 255) ++v;
          }
        }
      }
    }
    for (auto &kv : fresh) {
      if (!admits(kv.first)) {
        ++dropped;
        continue;
      }
      counts.erase(kv.first);
      t.step(t.row(kv.first), kv.second);
      st[kv.first] = State{step, 1};
      ++admitted;
    }
    bool evicts = lc.ttl_steps > 0 || lc.max_rows > 0 || lc.min_l2_norm > 0;
    if (evicts && step % lc.evict_interval == 0) boundary();
  }

  bool admits(int64_t id) const {
    if (!counting()) return true;
    if (lc.admission == HB_ADMIT_COUNT) {
      auto it = counts.find(id);
      return it != counts.end() && it->second.count >= (uint32_t)lc.min_count;
    }
    uint32_t least = 255;
    for (uint64_t cell : cells(id))
      least = std::min<uint32_t>(least, bloom[owner(id)][cell]);
    return least >= (uint32_t)lc.min_count;
  }

  void boundary() {
    std::vector<int64_t> out;
    for (auto &kv : st) {
      if (lc.ttl_steps > 0 && step - kv.second.last >= (uint64_t)lc.ttl_steps) {
        out.push_back(kv.first);
        ++ev_ttl;
        continue;
      }
      if (lc.min_l2_norm > 0) {
        double q = 0;
        for (float w : t.rows.at(kv.first).w) q += double(w) * double(w);
        if (q < lc.min_l2_norm * lc.min_l2_norm) {
          out.push_back(kv.first);
          ++ev_l2;
        }
      }
    }
    for (int64_t id : out) drop(id);
    if (lc.ttl_steps > 0)
      for (auto it = counts.begin(); it != counts.end();)
        it = step - it->second.last_seen >= (uint64_t)lc.ttl_steps
                 ? counts.erase(it)
                 : std::next(it);
    if (lc.max_rows > 0 && (int64_t)st.size() > lc.max_rows) {
      std::vector<std::pair<uint64_t, int64_t>> order;
      for (auto &kv : st)
        order.emplace_back(
            lc.score == HB_SCORE_LFU ? kv.second.updates : kv.second.last,
            kv.first);
      std::sort(order.begin(), order.end());
      size_t excess = st.size() - lc.max_rows;
      for (size_t i = 0; i < excess; ++i) {
        out.push_back(order[i].second);
        drop(order[i].second);
        ++ev_cap;
      }
    }
    std::sort(out.begin(), out.end());
    evicted.insert(evicted.end(), out.begin(), out.end());
  }
  void drop(int64_t id) {
    t.rows.erase(id);
    st.erase(id);
  }
};

}  // namespace hbtest
