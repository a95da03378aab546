// AdaNet placement strategies: a straightforward transcription of
// adanet/distributed/placement.py as the reference, compared over workers
// 1..8 and subnetworks 1..5 in both drop_remainder modes, plus AdaNet's own
// hand-written expectations for three subnetworks.
#include <gtest/gtest.h>

#include <vector>

#include "hb.h"

namespace {

// RoundRobinStrategy, as in AdaNet (Python semantics, non-negative ints).
struct AdanetRoundRobin {
  bool drop_remainder;
  int num_workers;
  int worker_index;

  int worker_task(int num_subnetworks) const {
    return worker_index % (num_subnetworks + 1);
  }
  bool should_build_ensemble(int num_subnetworks) const {
    if (num_subnetworks == 1) return true;
    return worker_task(num_subnetworks) == 0;
  }
  bool should_build_subnetwork(int num_subnetworks,
                               int subnetwork_index) const {
    if (num_subnetworks == 1) return true;
    int task = worker_task(num_subnetworks);
    if (task == 0) return true;
    int subnetwork_worker_index = task - 1;
    if (drop_remainder) return subnetwork_worker_index == subnetwork_index;
    int workers_per_subnetwork = num_workers / (num_subnetworks + 1);
    int num_subnetwork_workers;
    if (num_workers % (num_subnetworks + 1) == 0)
      num_subnetwork_workers = num_subnetworks;
    else if (worker_index >= workers_per_subnetwork * (num_subnetworks + 1))
      num_subnetwork_workers = num_workers % (num_subnetworks + 1) - 1;
    else
      num_subnetwork_workers = num_subnetworks;
    return subnetwork_worker_index == subnetwork_index % num_subnetwork_workers;
  }
  bool should_train_subnetworks(int num_subnetworks) const {
    if (num_subnetworks == 1 || num_workers == 1) return true;
    return !should_build_ensemble(num_subnetworks);
  }
};

struct Answer {
  int32_t ensemble = -1, train = -1;
  std::vector<int32_t> build;
};

Answer round_robin(int workers, int index, int k, bool drop) {
  Answer a;
  a.build.assign(k, -1);
  EXPECT_EQ(hb_placement_round_robin(workers, index, k, drop, &a.ensemble,
                                     &a.train, a.build.data()),
            HB_OK)
      << hb_last_error();
  return a;
}

}  // namespace

TEST(Placement, RoundRobinMatchesAdanetTable) {
  for (int drop = 0; drop <= 1; ++drop)
    for (int workers = 1; workers <= 8; ++workers)
      for (int k = 1; k <= 5; ++k)
        for (int index = 0; index < workers; ++index) {
          AdanetRoundRobin ref{drop != 0, workers, index};
          Answer a = round_robin(workers, index, k, drop);
          SCOPED_TRACE(testing::Message()
                       << "workers=" << workers << " index=" << index
                       << " subnetworks=" << k << " drop=" << drop);
          EXPECT_EQ(a.ensemble, ref.should_build_ensemble(k));
          EXPECT_EQ(a.train, ref.should_train_subnetworks(k));
          for (int s = 0; s < k; ++s)
            EXPECT_EQ(a.build[s], ref.should_build_subnetwork(k, s)) << s;
        }
}

TEST(Placement, RoundRobinAdanetExpectationsForThreeSubnetworks) {
  // From AdaNet's placement_test.py (T = true, D = not drop_remainder).
  const char *want[8][8] = {
      {"TTT"},
      {"TTT", "TDD"},
      {"TTT", "TFD", "FTF"},
      {"TTT", "TFF", "FTF", "FFT"},
      {"TTT", "TFF", "FTF", "FFT", "TTT"},
      {"TTT", "TFF", "FTF", "FFT", "TTT", "TDD"},
      {"TTT", "TFF", "FTF", "FFT", "TTT", "TFD", "FTF"},
      {"TTT", "TFF", "FTF", "FFT", "TTT", "TFF", "FTF", "FFT"},
  };
  for (int drop = 0; drop <= 1; ++drop)
    for (int workers = 1; workers <= 8; ++workers)
      for (int index = 0; index < workers; ++index) {
        Answer a = round_robin(workers, index, 3, drop);
        bool ensemble = index % 4 == 0;
        EXPECT_EQ(a.ensemble, ensemble);
        EXPECT_EQ(a.train, workers == 1 ? 1 : !ensemble);
        for (int s = 0; s < 3; ++s) {
          char c = want[workers - 1][index][s];
          int expect = c == 'T' ? 1 : c == 'F' ? 0 : !drop;
          EXPECT_EQ(a.build[s], expect)
              << workers << " workers, index " << index << ", subnetwork " << s;
        }
      }
}

TEST(Placement, ReplicationBuildsAndTrainsEverything) {
  for (int workers = 1; workers <= 8; ++workers)
    for (int k = 0; k <= 5; ++k)
      for (int index = 0; index < workers; ++index) {
        int32_t e = -1, t = -1;
        std::vector<int32_t> b(k + 1, -1);
        ASSERT_EQ(hb_placement_replication(workers, index, k, &e, &t, b.data()),
                  HB_OK);
        EXPECT_EQ(e, 1);
        EXPECT_EQ(t, 1);
        for (int s = 0; s < k; ++s) EXPECT_EQ(b[s], 1);
        EXPECT_EQ(b[k], -1);  // writes exactly num_subnetworks entries
      }
}

TEST(Placement, BadArguments) {
  int32_t e, t, b[4];
  EXPECT_EQ(hb_placement_round_robin(0, 0, 3, 0, &e, &t, b),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_placement_round_robin(4, 4, 3, 0, &e, &t, b),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hb_last_error()).find("worker_index"),
            std::string::npos);
  EXPECT_EQ(hb_placement_round_robin(4, -1, 3, 0, &e, &t, b),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_placement_round_robin(4, 0, -1, 0, &e, &t, b),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_placement_round_robin(4, 0, 3, 0, nullptr, &t, b),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_placement_round_robin(4, 0, 3, 0, &e, &t, nullptr),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_placement_replication(4, 0, 3, &e, nullptr, b),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_placement_round_robin(4, 0, 0, 0, &e, &t, nullptr),
            HB_OK);  // no subnetworks
}
