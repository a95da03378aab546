// The serving replica's row store (rows in hash-slot order, linear probing
// with backward-shift deletion) against a std::map reference, and the huge
// page allocation under it.
#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "serving/huge_pages.h"
#include "serving/row_table.h"

namespace {

using hb::serving::RowTable;
using Ref = std::map<int64_t, std::vector<float>>;

const int64_t kDim = 3;

std::vector<float> row_of(int64_t id, int gen) {
  return {static_cast<float>(id % 1000), static_cast<float>(gen), 0.5f};
}

void expect_equal(const RowTable &t, const Ref &ref,
                  const std::vector<int64_t> &universe) {
  ASSERT_EQ(t.size(), ref.size());
  for (int64_t id : universe) {
    const float *r = t.find(id);
    auto it = ref.find(id);
    if (it == ref.end()) {
      EXPECT_EQ(r, nullptr) << "id " << id;
    } else {
      ASSERT_NE(r, nullptr) << "id " << id;
      EXPECT_EQ(std::memcmp(r, it->second.data(), 4 * kDim), 0) << "id " << id;
    }
  }
  Ref seen;
  t.for_each([&](int64_t id, const float *r) {
    EXPECT_TRUE(seen.emplace(id, std::vector<float>(r, r + kDim)).second);
  });
  EXPECT_EQ(seen, ref);
}

// Random puts and erases over a small universe (long probe chains that
// wrap around the end of the slots, the free-slot marker INT64_MIN as an
// id, extremes), checked against the reference after every batch.
TEST(RowTable, MatchesReferenceUnderPutsAndErases) {
  std::vector<int64_t> universe = {INT64_MIN, INT64_MIN + 1, INT64_MAX, -1, 0};
  for (int64_t i = 1; i < 400; ++i) universe.push_back(i * 7919 - 1000000);
  std::mt19937_64 rng(7);
  RowTable t(kDim, 0);
  Ref ref;
  for (int batch = 0; batch < 200; ++batch) {
    for (int k = 0; k < 50; ++k) {
      const int64_t id = universe[rng() % universe.size()];
      if (rng() % 3 == 0) {
        EXPECT_EQ(t.erase(id), ref.erase(id) == 1) << "id " << id;
      } else {
        const std::vector<float> r = row_of(id, batch);
        EXPECT_EQ(t.put(id, r.data()), ref.find(id) == ref.end());
        ref[id] = r;
      }
    }
    expect_equal(t, ref, universe);
    if (HasFatalFailure()) return;
  }
}

// Filling past the load limit rebuilds with every row kept; erasing
// everything leaves an empty table that still finds nothing.
TEST(RowTable, GrowsAndEmpties) {
  RowTable t(kDim, 10);
  Ref ref;
  std::vector<int64_t> universe;
  for (int64_t i = 0; i < 20000; ++i) {
    const int64_t id = (i * 0x9E3779B97F4A7C15ll) ^ i;
    universe.push_back(id);
    const std::vector<float> r = row_of(id, 1);
    ASSERT_TRUE(t.put(id, r.data()));
    ref[id] = r;
  }
  EXPECT_GE(t.slots() * 0.8, t.size());
  expect_equal(t, ref, universe);
  for (int64_t id : universe) ASSERT_TRUE(t.erase(id));
  ref.clear();
  expect_equal(t, ref, universe);
}

// A big allocation is 2 MiB-aligned and advised for huge pages: where the
// kernel offers transparent huge pages, smaps marks its mapping eligible.
TEST(HugePages, BigAllocationsAreAlignedAndEligible) {
  const size_t bytes = (size_t{5} << 20) + 123;
  void *p = hb::serving::huge_alloc(bytes);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (size_t{2} << 20), 0u);
  std::memset(p, 1, bytes);
  std::ifstream mode("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string m((std::istreambuf_iterator<char>(mode)),
                std::istreambuf_iterator<char>());
  bool checked = false, eligible = false, in = false;
  std::ifstream smaps("/proc/self/smaps");
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  for (std::string line; std::getline(smaps, line);) {
    unsigned long lo, hi;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2)  // a mapping
      in = lo <= a && a < hi;
    if (in && line.rfind("THPeligible:", 0) == 0) {
      checked = true;
      eligible = line.find('1') != std::string::npos;
    }
  }
  hb::serving::huge_free(p, bytes);
  void *small = hb::serving::huge_alloc(100);
  ASSERT_NE(small, nullptr);
  hb::serving::huge_free(small, 100);
  const bool thp = m.find("[always]") != std::string::npos ||
                   m.find("[madvise]") != std::string::npos;
  if (!thp || !checked) GTEST_SKIP() << "no transparent huge pages here";
  EXPECT_TRUE(eligible);
}

}  // namespace
