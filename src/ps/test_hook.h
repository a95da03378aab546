// Tests: called where a crash splits a worker's step (tests/ps kills its
// real processes there): "push_sent" after a push request went to ps task
// `ps` and before the next one is sent (the per-step pushes of a worker go
// to each ps task, table by table or collection by collection).
#pragma once

#include <functional>

namespace hb {
namespace ps {

extern std::function<void(const char *point, int ps)> g_test_hook;

inline void test_point(const char *point, int ps) {
  if (g_test_hook) g_test_hook(point, ps);
}

}  // namespace ps
}  // namespace hb
