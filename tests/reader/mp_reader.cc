// One rank of the multi-process reader test (run at 2 and 3 ranks under
// hbrun). The reader takes rank and world from the context; a loop on
// hb_data_sync (no drop remainder) feeds empty batches to ranks that are
// out, until every rank is done. Over all ranks every line is read exactly
// once: the count, the sum and the sum of squares of the lines' serial
// numbers match. Every rank writes the same files into its own folder.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "common/mp_check.h"
#include "hb.h"

int g_mp_rank = -1;
const char *g_mp_name = "mp_reader";

namespace {

// Two files (fewer than the ranks: byte ranges), then five (by file: some
// empty or of one line).
const int kLines[] = {40, 313, 0, 1, 7};

std::string write_files(const std::string &dir, int count) {
  ::mkdir(dir.c_str(), 0755);
  int serial = 0;
  for (int k = 0; k < count; ++k) {
    std::string text;
    for (int i = 0; i < kLines[k]; ++i, ++serial) {
      char line[64];
      // label, 13 empty dense fields, serial as the first categorical, 25
      // empty categoricals.
      std::snprintf(line, sizeof line, "%d%s\t%x%s\n", serial % 2,
                    std::string(13, '\t').c_str(), serial,
                    std::string(25, '\t').c_str());
      text += line;
    }
    FILE *f = std::fopen((dir + "/part-" + std::to_string(k)).c_str(), "wb");
    CHECK(f, "cannot write under %s", dir.c_str());
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }
  return dir + "/part-*";
}

}  // namespace

int main() {
  hb_context *ctx = nullptr;
  CHECK_OK(hb_context_create(nullptr, &ctx));
  g_mp_rank = hb_context_rank(ctx);
  const std::string dir = "/tmp/hb_mp_reader_" + std::to_string(getppid()) +
                          "_" + std::to_string(g_mp_rank);
  for (int files : {2, 5}) {  // fewer files than 3 ranks, then more
    int64_t total = 0;
    for (int k = 0; k < files; ++k) total += kLines[k];
    std::string glob = write_files(dir, files);
    hb_reader_config cfg = HB_READER_CONFIG_INIT;
    cfg.batch_size = 16;
    cfg.chunk_bytes = 100;
    const char *paths[] = {glob.c_str()};
    hb_reader *r = nullptr;
    CHECK_OK(hb_reader_create(ctx, paths, 1, &cfg, &r));
    double stats[4] = {0, 0, 0, 0};  // lines, sum, sum of squares, steps
    for (int guard = 0; guard < 10000; ++guard) {
      hb_reader_batch *b = nullptr;
      CHECK_OK(hb_reader_next(r, &b));
      int32_t cont = 0, empty = 0;
      CHECK_OK(hb_data_sync(ctx, b != nullptr, 0, &cont, &empty));
      if (!cont) break;
      CHECK(empty == (b == nullptr), "feed_empty %d with batch %p", empty,
            static_cast<void *>(b));
      stats[3] += 1;
      if (!b) continue;
      for (int64_t i = 0; i < b->size; ++i) {
        CHECK(b->offsets[i + 1] - b->offsets[i] == 1, "sample %lld has no id",
              static_cast<long long>(i));
        double s = static_cast<double>(b->ids[b->offsets[i]]);
        stats[0] += 1, stats[1] += s, stats[2] += s * s;
      }
      hb_reader_batch_free(b);
    }
    hb_reader_destroy(r);
    double steps = stats[3];
    CHECK_OK(hb_allreduce(ctx, stats, stats, 3, HB_FLOAT64, HB_SUM));
    double max_steps = steps;
    CHECK_OK(hb_allreduce(ctx, &max_steps, &max_steps, 1, HB_FLOAT64, HB_MAX));
    CHECK(steps == max_steps, "rank ran %g steps, another %g", steps,
          max_steps);
    const double n = static_cast<double>(total);
    CHECK(stats[0] == n, "%d files: %g lines read over all ranks, want %g",
          files, stats[0], n);
    CHECK(stats[1] == n * (n - 1) / 2, "sum of serials %g", stats[1]);
    CHECK(stats[2] == (n - 1) * n * (2 * n - 1) / 6, "sum of squares %g",
          stats[2]);
  }
  std::system(("rm -rf '" + dir + "'").c_str());
  CHECK_OK(hb_context_barrier(ctx, 0));
  hb_context_destroy(ctx);
  if (g_mp_rank == 0) std::printf("mp_reader: OK\n");
  return 0;
}
