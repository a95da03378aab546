// Helpers shared by the collection tests (host and device collections, k
// ranks as threads): the first error any rank reports, each rank's outcome
// of a call expected to fail, and the internal view of a JBatch.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "abi/error.h"
#include "collection_ref.h"
#include "embedding/collection.h"
#include "harness.h"
#include "thread_exchange.h"

namespace hbtest {

struct Outcomes {
  std::vector<hb_status> st;
  std::vector<std::string> msg;
};

// Runs fn(rank, setup) on `world` ranks, each with the Setup make(rank)
// returns, and collects each rank's status and message.
template <class Setup>
Outcomes run_failing(int world,
                     const std::function<std::unique_ptr<Setup>(int)> &make,
                     const std::function<void(int, Setup &)> &fn) {
  Outcomes o;
  o.st.assign(world, HB_OK);
  o.msg.resize(world);
  ThreadWorld::run(world, [&](int r) {
    std::unique_ptr<Setup> s = make(r);
    try {
      fn(r, *s);
    } catch (const hb::Error &e) {
      o.st[r] = e.status();
      o.msg[r] = e.what();
    }
  });
  return o;
}

// The batch as the collection takes it (host arrays).
inline hb::emb::JaggedBatch internal_view(JBatch &b) {
  hb_jagged_batch v = b.view();
  hb::emb::JaggedBatch j;
  j.batch = v.batch_size, j.ids = v.ids, j.offsets = v.offsets,
  j.lengths = v.lengths, j.weights = v.weights;
  return j;
}

}  // namespace hbtest
