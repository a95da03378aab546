// criteo_synth_tsv: writes criteo-synth samples (examples/ctr_train/
// synth_data.h, the generator of the demos) as Criteo-format files, so that
// training from files (ctr_train --data 'glob') sees the same samples as
// training from the generator.
//
//   criteo_synth_tsv --out DIR [--samples N] [--files K] [--split S]
//                    [--seed S] [--vocab V] [--gzip]
//
// Line layout (tab-separated, the reader's default): label (0 or 1), the 13
// dense values printed with %.9g (a float read back is the same float), the
// 26 ids in lowercase hexadecimal. Sample i of split S goes to file
// part-NNNNN(.tsv|.gz) in order; file k holds about (1 + k % 5) shares, so
// the files are of uneven size like the demo's virtual files.
#include <zlib.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "synth_data.h"

namespace {

struct Flags {
  std::string out;
  int64_t samples = 480000, files = 24, vocab = 2048;
  int split = 0;
  uint64_t seed = 2026;
  bool gzip = false;
};

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: criteo_synth_tsv --out DIR [--samples N] [--files K] "
               "[--split S] [--seed S] [--vocab V] [--gzip]\n");
  std::exit(2);
}

Flags parse(int argc, char **argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> const char * {
      if (i + 1 >= argc) usage();
      return argv[++i];
    };
    if (a == "--out")
      f.out = val();
    else if (a == "--samples")
      f.samples = std::atoll(val());
    else if (a == "--files")
      f.files = std::atoll(val());
    else if (a == "--split")
      f.split = std::atoi(val());
    else if (a == "--seed")
      f.seed = std::strtoull(val(), nullptr, 10);
    else if (a == "--vocab")
      f.vocab = std::atoll(val());
    else if (a == "--gzip")
      f.gzip = true;
    else
      usage();
  }
  if (f.out.empty() || f.samples < 0 || f.files < 1 || f.vocab < 1 ||
      (f.vocab & (f.vocab - 1)))
    usage();
  return f;
}

// One sample as a Criteo line (with its newline) into buf; returns length.
int format_line(const synth::Sample &s, char *buf, size_t cap) {
  int n = std::snprintf(buf, cap, "%d", s.label > 0.5f ? 1 : 0);
  for (int j = 0; j < synth::kDense; ++j)
    n += std::snprintf(buf + n, cap - n, "\t%.9g",
                       static_cast<double>(s.dense[j]));
  for (int t = 0; t < synth::kTables; ++t)
    n += std::snprintf(buf + n, cap - n, "\t%" PRIx64,
                       static_cast<uint64_t>(s.ids[t]));
  buf[n++] = '\n';
  return n;
}

}  // namespace

int main(int argc, char **argv) {
  Flags f = parse(argc, argv);
  for (size_t at = 1; at != std::string::npos; at = f.out.find('/', at + 1))
    ::mkdir(f.out.substr(0, at).c_str(), 0755);  // mkdir -p
  ::mkdir(f.out.c_str(), 0755);
  synth::Generator gen(f.seed, f.vocab, 1.1);
  double total = 0;
  for (int64_t k = 0; k < f.files; ++k)
    total += 1.0 + static_cast<double>(k % 5);
  double cum = 0;
  int64_t begin = 0;
  char line[1024];
  for (int64_t k = 0; k < f.files; ++k) {
    cum += 1.0 + static_cast<double>(k % 5);
    int64_t end = std::llround(static_cast<double>(f.samples) * cum / total);
    char name[64];
    std::snprintf(name, sizeof name, "/part-%05" PRId64 "%s", k,
                  f.gzip ? ".gz" : ".tsv");
    std::string path = f.out + name;
    gzFile gz = nullptr;
    FILE *fp = nullptr;
    if (f.gzip)
      gz = gzopen(path.c_str(), "wb6");
    else
      fp = std::fopen(path.c_str(), "wb");
    if (!gz && !fp) {
      std::perror(path.c_str());
      return 1;
    }
    bool ok = true;
    synth::Sample s;
    for (int64_t i = begin; i < end && ok; ++i) {
      gen.sample(f.split, i, &s);
      int n = format_line(s, line, sizeof line);
      ok = f.gzip ? gzwrite(gz, line, static_cast<unsigned>(n)) == n
                  : std::fwrite(line, 1, n, fp) == static_cast<size_t>(n);
    }
    ok = (f.gzip ? gzclose(gz) == Z_OK : std::fclose(fp) == 0) && ok;
    if (!ok) {
      std::fprintf(stderr, "criteo_synth_tsv: cannot write %s\n", path.c_str());
      return 1;
    }
    begin = end;
  }
  std::printf("criteo_synth_tsv: %" PRId64 " samples of split %d in %" PRId64
              " files under %s\n",
              f.samples, f.split, f.files, f.out.c_str());
  return 0;
}
