// Tests: called at the phases of a save and a restore where a crash is the
// hardest case (tests/recovery kills its real processes there):
// "files_written" (this rank's files committed, not published), "manifest"
// (rank 0 has every rank's files, MANIFEST not written), "restore_staged"
// (state read, tables not loaded), "restore_tables" (tables loaded, the
// rest not swapped in).
#pragma once

#include <functional>

namespace hb {
namespace recovery {

extern std::function<void(const char *phase)> g_test_hook;

inline void test_point(const char *phase) {
  if (g_test_hook) g_test_hook(phase);
}

}  // namespace recovery
}  // namespace hb
