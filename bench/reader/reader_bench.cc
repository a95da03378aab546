// reader_bench: how fast hb_reader turns Criteo-format text into batches.
//
//   reader_bench [--lines N] [--threads T] [--batch B] [--dir DIR]
//
// Writes N synthetic Criteo lines (about 200 bytes each: small integers,
// a quarter of the fields empty, 8-digit hex categoricals) to DIR as 8 plain
// files and 8 gzip files, then prints one table row per case:
//   parse_line      the line parser alone, one core, lines already in memory;
//   reader plain    hb_reader end to end (read, split, parse, batch) with
//                   1 and T parser threads;
//   reader gzip     the same over the gzip files (sharded by file only).
// lines/cpu-s divides by the CPU time of all threads: the rate per core,
// even on a shared machine. Target (issue #15): >= 1M lines/s per core.
#include <sys/stat.h>
#include <zlib.h>

#include <time.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "hb.h"
#include "reader/line_parser.h"
#include "reader/settings.h"

namespace {

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string make_line(std::mt19937_64 &rng) {
  std::string s = (rng() % 4 == 0) ? "1" : "0";
  char buf[32];
  for (int j = 0; j < 13; ++j) {
    s += '\t';
    uint64_t r = rng();
    if (r % 4 == 0) continue;  // missing, as often in Criteo
    std::snprintf(buf, sizeof buf, "%d",
                  static_cast<int>((r >> 8) % (j < 6 ? 20 : 1000)));
    s += buf;
  }
  for (int f = 0; f < 26; ++f) {
    s += '\t';
    uint64_t r = rng();
    if (r % 4 == 0) continue;  // Criteo lines often miss a few
    std::snprintf(buf, sizeof buf, "%08" PRIx32,
                  static_cast<uint32_t>(r >> 20));
    s += buf;
  }
  return s;
}

// CPU seconds of the whole process (all threads): lines per CPU-second is
// the per-core rate, whatever else shares the machine.
double cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct Result {
  double seconds;
  uint64_t lines;
  double cpu_seconds;
};

Result run_reader(const std::vector<std::string> &paths, int threads,
                  int64_t batch) {
  std::vector<const char *> ps;
  for (auto &p : paths) ps.push_back(p.c_str());
  hb_reader_config cfg = HB_READER_CONFIG_INIT;
  cfg.batch_size = batch;
  cfg.num_threads = threads;
  cfg.queue_depth = 8;
  hb_reader *r = nullptr;
  double t0 = now(), c0 = cpu_now();
  if (hb_reader_create(nullptr, ps.data(), ps.size(), &cfg, &r) != HB_OK) {
    std::fprintf(stderr, "reader_bench: %s\n", hb_last_error());
    std::exit(1);
  }
  for (;;) {
    hb_reader_batch *b = nullptr;
    if (hb_reader_next(r, &b) != HB_OK) {
      std::fprintf(stderr, "reader_bench: %s\n", hb_last_error());
      std::exit(1);
    }
    if (!b) break;
    hb_reader_batch_free(b);
  }
  Result res{now() - t0, hb_reader_lines(r), cpu_now() - c0};
  hb_reader_destroy(r);
  return res;
}

void row(const char *what, int threads, const Result &r, double bytes) {
  double lps = r.lines / r.seconds;
  std::printf("%-14s %7d %12" PRIu64 " %9.3f %12.0f %12.0f %12.0f %9.1f\n",
              what, threads, r.lines, r.seconds, lps, lps / threads,
              r.lines / r.cpu_seconds, bytes / r.seconds / 1e6);
}

}  // namespace

int main(int argc, char **argv) {
  int64_t lines = 2000000, batch = 4096;
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  std::string dir = "/tmp/hb_reader_bench";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--lines")
      lines = std::atoll(argv[i + 1]);
    else if (a == "--threads")
      threads = std::atoi(argv[i + 1]);
    else if (a == "--batch")
      batch = std::atoll(argv[i + 1]);
    else if (a == "--dir")
      dir = argv[i + 1];
    else {
      std::fprintf(stderr,
                   "usage: reader_bench [--lines N] [--threads T] [--batch B] "
                   "[--dir DIR]\n");
      return 2;
    }
  }
  if (threads < 1) threads = 1;
  ::mkdir(dir.c_str(), 0755);
  std::mt19937_64 rng(1);
  std::vector<std::string> text(8);
  std::vector<std::string> mem;  // one file's lines, for the parser alone
  double bytes = 0;
  for (int64_t i = 0; i < lines; ++i) {
    std::string l = make_line(rng);
    bytes += l.size() + 1;
    if (i % 8 == 0) mem.push_back(l);
    text[i % 8] += l + "\n";
  }
  std::vector<std::string> plain, gz;
  for (int k = 0; k < 8; ++k) {
    plain.push_back(dir + "/part-" + std::to_string(k) + ".tsv");
    gz.push_back(dir + "/part-" + std::to_string(k) + ".gz");
    FILE *f = std::fopen(plain.back().c_str(), "wb");
    std::fwrite(text[k].data(), 1, text[k].size(), f);
    std::fclose(f);
    gzFile g = gzopen(gz.back().c_str(), "wb6");
    gzwrite(g, text[k].data(), static_cast<unsigned>(text[k].size()));
    gzclose(g);
  }
  text.clear();
  std::printf("reader_bench: %" PRId64
              " lines, %.0f bytes/line on average, batch %" PRId64
              ", %u cores\n",
              lines, bytes / lines, batch, std::thread::hardware_concurrency());
  std::printf("%-14s %7s %12s %9s %12s %12s %12s %9s\n", "case", "threads",
              "lines", "seconds", "lines/s", "lines/s/thr", "lines/cpu-s",
              "MB/s");

  // The parser alone.
  hb::reader::Settings s = hb::reader::settings_from_config(nullptr);
  float label, dense[13];
  int64_t ids[26];
  uint8_t present[26];
  double mem_bytes = 0;
  for (auto &l : mem) mem_bytes += l.size() + 1;
  int reps = 3;
  double t0 = now(), c0 = cpu_now();
  int64_t sink = 0;
  for (int k = 0; k < reps; ++k)
    for (auto &l : mem) {
      hb::reader::ParseError err;
      sink += hb::reader::parse_line(s, l.data(), l.size(), &label, dense, ids,
                                     present, &err);
      sink += ids[3];
    }
  Result pr{now() - t0, static_cast<uint64_t>(mem.size()) * reps,
            cpu_now() - c0};
  row("parse_line", 1, pr, mem_bytes * reps);
  if (sink == 42) std::printf(" ");

  row("reader plain", 1, run_reader(plain, 1, batch), bytes);
  if (threads > 1)
    row("reader plain", threads, run_reader(plain, threads, batch), bytes);
  row("reader gzip", 1, run_reader(gz, 1, batch), bytes);
  if (threads > 1)
    row("reader gzip", threads, run_reader(gz, threads, batch), bytes);
  return 0;
}
