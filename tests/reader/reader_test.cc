// The reader end to end: exactly-once sharding over 1-4 ranks (uneven,
// tiny and empty files, no final newline, CRLF), values against an
// independent parser, gzip == plain, epochs and shuffle, bad input.
#include <algorithm>
#include <map>
#include <set>

#include "reader_test_util.h"

namespace {

using rt::RefRow;

struct Corpus {
  std::vector<std::string> paths;
  std::vector<std::string> lines;  // all lines, file order
  uint64_t serials = 0;
};

// Files of uneven sizes: empty, smaller than a line, one line without a
// final newline, CRLF ends, blank lines, and bigger ones. gzip: also write
// the same files compressed (when `gzip`).
Corpus make_corpus(const rt::TempDir &dir, uint64_t seed, bool gzip,
                   const std::vector<int> &line_counts) {
  std::mt19937_64 rng(seed);
  Corpus c;
  for (size_t i = 0; i < line_counts.size(); ++i) {
    std::string text;
    int n = line_counts[i];
    bool crlf = i % 3 == 1, final_nl = i % 4 != 2;
    for (int k = 0; k < n; ++k) {
      std::string l = rt::criteo_line(c.serials++, rng);
      c.lines.push_back(l);
      text += l;
      if (k + 1 < n || final_nl) text += crlf ? "\r\n" : "\n";
      if (k % 17 == 5) text += "\n";  // a blank line: skipped
    }
    std::string p =
        dir.file("part-" + std::to_string(i) + (gzip ? ".gz" : ".tsv"));
    if (gzip)
      rt::write_gzip(p, text);
    else
      rt::write_file(p, text);
    c.paths.push_back(p);
  }
  return c;
}

hb_reader *open(const std::vector<std::string> &paths, hb_reader_config cfg) {
  std::vector<const char *> ps;
  for (auto &p : paths) ps.push_back(p.c_str());
  hb_reader *r = nullptr;
  hb_status st = hb_reader_create(nullptr, ps.data(), ps.size(), &cfg, &r);
  EXPECT_EQ(st, HB_OK) << hb_last_error();
  return r;
}

std::vector<RefRow> reference(const std::vector<std::string> &lines) {
  std::vector<RefRow> out;
  for (auto &l : lines) out.push_back(rt::ref_parse(l));
  return out;
}

// Reads `path` up to its error, which must be HB_ERR_CORRUPT, also on the
// call after: the rows before it into *rows, and the error's message.
std::string read_to_corrupt(const std::string &path,
                            const hb_reader_config &cfg,
                            std::vector<RefRow> *rows) {
  hb_reader *r = open({path}, cfg);
  EXPECT_EQ(rt::read_all(r, rows), HB_ERR_CORRUPT);
  std::string msg = hb_last_error();
  hb_reader_batch *b = nullptr;
  EXPECT_EQ(hb_reader_next(r, &b), HB_ERR_CORRUPT);
  EXPECT_EQ(b, nullptr);
  hb_reader_destroy(r);
  return msg;
}

// Serial numbers (first categorical) read by every shard of `world`.
void check_exactly_once(const Corpus &c, int world, hb_reader_config cfg) {
  std::multiset<int64_t> seen;
  for (int rank = 0; rank < world; ++rank) {
    cfg.shard_index = rank;
    cfg.num_shards = world;
    hb_reader *r = open(c.paths, cfg);
    ASSERT_TRUE(r);
    std::vector<RefRow> rows;
    ASSERT_EQ(rt::read_all(r, &rows), HB_OK) << hb_last_error();
    EXPECT_EQ(hb_reader_lines(r), rows.size());
    hb_reader_destroy(r);
    for (auto &row : rows) seen.insert(row.ids[0]);
  }
  ASSERT_EQ(seen.size(), c.serials) << "world " << world;
  int64_t want = 0;
  for (int64_t s : seen) ASSERT_EQ(s, want++) << "world " << world;
}

TEST(Reader, EveryLineExactlyOnceOver1To4Ranks) {
  rt::TempDir dir;
  // Uneven, empty (0), one line, tiny and larger files.
  Corpus many = make_corpus(dir, 1, false, {0, 1, 37, 3, 0, 120, 2, 9});
  rt::TempDir dir2;
  Corpus few = make_corpus(dir2, 2, false, {23, 1});  // fewer files than ranks
  rt::TempDir dir3;
  Corpus one = make_corpus(dir3, 3, false, {90});
  // Chunks of 61 bytes cut most lines (about 200 bytes) several times.
  for (const Corpus *c : {&many, &few, &one})
    for (int world = 1; world <= 4; ++world)
      for (int64_t chunk : {int64_t{61}, int64_t{4} << 20})
        for (int threads : {1, 3}) {
          if (c == &many && chunk == 61 && threads == 3) continue;
          hb_reader_config cfg = HB_READER_CONFIG_INIT;
          cfg.batch_size = 16;
          cfg.chunk_bytes = chunk;
          cfg.num_threads = threads;
          cfg.queue_depth = 1;
          SCOPED_TRACE("world " + std::to_string(world) + " chunk " +
                       std::to_string(chunk) + " threads " +
                       std::to_string(threads));
          check_exactly_once(*c, world, cfg);
        }
}

// Dynamic splits (hb_reader_seek_split): the files' bytes cut into splits
// of any size, each read in batches, with a fresh reader resuming at the
// committed offset (hb_reader_split_offset) after every other batch --
// every line exactly once, a split's lines in file order.
TEST(Reader, SplitsEveryLineOnceResumedAtCommittedOffsets) {
  rt::TempDir dir;
  Corpus c = make_corpus(dir, 7, false, {0, 1, 37, 3, 0, 20, 2, 9});
  hb_reader_config cfg = HB_READER_CONFIG_INIT;
  cfg.batch_size = 3;
  cfg.chunk_bytes = 97;
  cfg.drop_last = 1;  // ignored by a split reader: nothing may be dropped
  cfg.num_threads = 1;
  // Splits of 13 bytes: most inside one line (about 200 bytes), no line
  // starting in them.
  for (int64_t size :
       {int64_t{13}, int64_t{61}, int64_t{450}, int64_t{1} << 20})
    for (int resume_every : {0, 1, 2}) {
      SCOPED_TRACE("split size " + std::to_string(size) + " resume every " +
                   std::to_string(resume_every));
      hb_reader *r = open(c.paths, cfg);
      ASSERT_TRUE(r);
      int64_t total = 0;
      ASSERT_EQ(hb_reader_total_bytes(r, &total), HB_OK) << hb_last_error();
      int64_t off = 0;
      EXPECT_EQ(hb_reader_split_offset(r, &off), HB_ERR_INVALID_ARGUMENT);
      std::vector<int64_t> seen;
      int batches = 0;
      for (int64_t b = 0; b < total; b += size) {
        const int64_t e = std::min(total, b + size);
        ASSERT_EQ(hb_reader_seek_split(r, b, e), HB_OK) << hb_last_error();
        int64_t last = b;
        for (;;) {
          hb_reader_batch *batch = nullptr;
          ASSERT_EQ(hb_reader_next(r, &batch), HB_OK) << hb_last_error();
          ASSERT_EQ(hb_reader_split_offset(r, &off), HB_OK);
          ASSERT_GE(off, last);
          ASSERT_LE(off, e);
          last = off;
          if (!batch) break;
          EXPECT_EQ(batch->epoch, 0);
          const int64_t n = batch->size;
          for (int64_t i = 0; i < n; ++i) {
            const int64_t *ids = batch->ids + batch->offsets[i];
            seen.push_back(batch->offsets[i + 1] > batch->offsets[i] ? *ids
                                                                     : -1);
          }
          hb_reader_batch_free(batch);
          // A worker killed here: a new reader resumes at the offset.
          if (resume_every && ++batches % resume_every == 0) {
            hb_reader_destroy(r);
            r = open(c.paths, cfg);
            ASSERT_EQ(hb_reader_seek_split(r, off, e), HB_OK);
          }
        }
        EXPECT_EQ(last, e);
      }
      hb_reader_destroy(r);
      ASSERT_EQ(seen.size(), c.serials);
      for (size_t i = 0; i < seen.size(); ++i)
        ASSERT_EQ(seen[i], static_cast<int64_t>(i));
    }
  // Bad ranges, and gzip (cannot be cut).
  hb_reader *r = open(c.paths, cfg);
  EXPECT_EQ(hb_reader_seek_split(r, 5, 4), HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_reader_seek_split(r, 0, 1 << 30), HB_ERR_INVALID_ARGUMENT);
  hb_reader_destroy(r);
  rt::TempDir gz;
  Corpus z = make_corpus(gz, 8, true, {3});
  r = open(z.paths, cfg);
  int64_t total = 0;
  EXPECT_EQ(hb_reader_total_bytes(r, &total), HB_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(hb_last_error()).find(".gz"), std::string::npos);
  hb_reader_destroy(r);
}

TEST(Reader, FilesSmallerThanALineAndTinyRanges) {
  rt::TempDir dir;
  // Files of a few bytes: lines shorter than the ranges' cuts.
  std::string cols(38, '\t');  // 39 fields: label + 13 + 25 empty... fix below
  std::vector<std::string> paths;
  std::vector<std::string> lines;
  for (int i = 0; i < 3; ++i) {
    std::string l = std::to_string(i % 2);
    for (int j = 0; j < rt::kDense; ++j) l += "\t";
    l += "\t" + std::to_string(i);  // serial as hex (single digit)
    for (int f = 1; f < rt::kSparse; ++f) l += "\t";
    lines.push_back(l);
    paths.push_back(dir.file("t" + std::to_string(i)));
    rt::write_file(paths.back(), l);  // no newline at all
  }
  Corpus c{paths, lines, 3};
  for (int world = 1; world <= 4; ++world) {
    hb_reader_config cfg = HB_READER_CONFIG_INIT;
    cfg.chunk_bytes = 1;
    check_exactly_once(c, world, cfg);
  }
}

TEST(Reader, ValuesEqualAnIndependentParser) {
  rt::TempDir dir;
  Corpus c = make_corpus(dir, 4, false, {100, 0, 33, 250});
  for (int threads : {1, 2, 4}) {
    hb_reader_config cfg = HB_READER_CONFIG_INIT;
    cfg.batch_size = 64;
    cfg.chunk_bytes = 1000;
    cfg.num_threads = threads;
    hb_reader *r = open(c.paths, cfg);
    std::vector<RefRow> rows;
    std::vector<int64_t> sizes;
    ASSERT_EQ(rt::read_all(r, &rows, &sizes), HB_OK) << hb_last_error();
    hb_reader_destroy(r);
    rt::expect_rows_equal(rows, reference(c.lines));  // file and line order
    for (size_t i = 0; i + 1 < sizes.size(); ++i) EXPECT_EQ(sizes[i], 64);
    EXPECT_EQ(sizes.back(), 383 % 64);
  }
}

TEST(Reader, LogDenseHashingAndCustomLayout) {
  rt::TempDir dir;
  Corpus c = make_corpus(dir, 5, false, {50});
  hb_reader_config cfg = HB_READER_CONFIG_INIT;
  cfg.log_dense = 1;
  cfg.num_rows = 1000;
  hb_reader *r = open(c.paths, cfg);
  std::vector<RefRow> rows;
  ASSERT_EQ(rt::read_all(r, &rows), HB_OK);
  hb_reader_destroy(r);
  ASSERT_EQ(rows.size(), 50u);
  for (size_t i = 0; i < rows.size(); ++i) {
    RefRow want = rt::ref_parse(c.lines[i], true);
    EXPECT_EQ(rows[i].dense, want.dense);
    for (int f = 0; f < rt::kSparse; ++f)
      EXPECT_EQ(rows[i].ids[f], want.ids[f] < 0 ? -1 : want.ids[f] % 1000);
  }
  // A custom layout: "id,label,skip,value,cat" with ',' separators.
  std::string p = dir.file("custom.csv");
  rt::write_file(p, "x,1,zz,2.5,ff\ny,0,,,\n");
  hb_reader_config c2 = HB_READER_CONFIG_INIT;
  c2.columns = "SLSIC";
  c2.separator = ',';
  c2.dense_missing = -1.0f;
  c2.num_rows = 16;
  c2.hash = HB_READER_HASH_MIX;
  r = open({p}, c2);
  hb_reader_batch *b = nullptr;
  ASSERT_EQ(hb_reader_next(r, &b), HB_OK);
  ASSERT_TRUE(b);
  ASSERT_EQ(b->size, 2);
  EXPECT_EQ(b->num_dense, 1);
  EXPECT_EQ(b->num_sparse, 1);
  EXPECT_EQ(b->labels[0], 1.0f);
  EXPECT_EQ(b->labels[1], 0.0f);
  EXPECT_EQ(b->dense[0], 2.5f);
  EXPECT_EQ(b->dense[1], -1.0f);
  EXPECT_EQ(b->num_ids, 1);
  EXPECT_EQ(b->offsets[0], 0);
  EXPECT_EQ(b->offsets[1], 1);
  EXPECT_EQ(b->offsets[2], 1);
  EXPECT_TRUE(b->ids[0] >= 0 && b->ids[0] < 16);
  hb_reader_batch_free(b);
  hb_reader_destroy(r);
}

TEST(Reader, GzipAndPlainGiveTheSameBatches) {
  rt::TempDir plain_dir, gz_dir;
  std::vector<int> counts = {40, 0, 7, 130, 1};
  Corpus plain = make_corpus(plain_dir, 6, false, counts);
  Corpus gz = make_corpus(gz_dir, 6, true, counts);
  ASSERT_EQ(plain.lines, gz.lines);
  hb_reader_config cfg = HB_READER_CONFIG_INIT;
  cfg.batch_size = 32;
  std::vector<RefRow> a, b;
  hb_reader *r = open(plain.paths, cfg);
  ASSERT_EQ(rt::read_all(r, &a), HB_OK);
  hb_reader_destroy(r);
  r = open(gz.paths, cfg);
  ASSERT_EQ(rt::read_all(r, &b), HB_OK) << hb_last_error();
  hb_reader_destroy(r);
  rt::expect_rows_equal(b, a);
  // Gzip files are sharded by file only: fewer gzip files than ranks still
  // reads every line exactly once (some ranks get none).
  for (int world = 1; world <= 4; ++world) {
    cfg.chunk_bytes = 5;
    check_exactly_once(gz, world, cfg);
    Corpus two{{gz.paths[0], gz.paths[3]}, {}, 0};
    std::set<int64_t> seen;
    size_t total = 0;
    for (int rank = 0; rank < world; ++rank) {
      cfg.shard_index = rank;
      cfg.num_shards = world;
      std::vector<RefRow> rows;
      hb_reader *rr = open(two.paths, cfg);
      ASSERT_EQ(rt::read_all(rr, &rows), HB_OK);
      hb_reader_destroy(rr);
      total += rows.size();
      for (auto &row : rows) seen.insert(row.ids[0]);
    }
    EXPECT_EQ(total, 170u);
    EXPECT_EQ(seen.size(), 170u);
    cfg.shard_index = -1;
    cfg.num_shards = 0;
  }
}

TEST(Reader, EpochsShuffleAndDropLast) {
  rt::TempDir dir;
  Corpus c = make_corpus(dir, 7, false, {10, 11, 12, 13, 14});
  auto first_ids = [&](hb_reader_config cfg, std::vector<int64_t> *sizes,
                       std::vector<int32_t> *epochs) {
    hb_reader *r = open(c.paths, cfg);
    std::vector<int64_t> ids;
    for (;;) {
      hb_reader_batch *b = nullptr;
      EXPECT_EQ(hb_reader_next(r, &b), HB_OK);
      if (!b) break;
      for (int64_t i = 0; i < b->size; ++i) ids.push_back(b->ids[i]);
      if (sizes) sizes->push_back(b->size);
      if (epochs) epochs->push_back(b->epoch);
      hb_reader_batch_free(b);
    }
    hb_reader_destroy(r);
    return ids;
  };
  hb_reader_config cfg = HB_READER_CONFIG_INIT;
  cfg.batch_size = 8;
  cfg.num_epochs = 3;
  std::vector<int64_t> sizes;
  std::vector<int32_t> epochs;
  std::vector<int64_t> plain = first_ids(cfg, &sizes, &epochs);
  ASSERT_EQ(plain.size(), 3 * 60u);
  // 60 lines per epoch in batches of 8: 7 full + one of 4, per epoch.
  ASSERT_EQ(sizes.size(), 24u);
  for (int e = 0; e < 3; ++e) {
    for (int k = 0; k < 8; ++k) EXPECT_EQ(epochs[e * 8 + k], e);
    EXPECT_EQ(sizes[e * 8 + 7], 4);
  }
  cfg.drop_last = 1;
  sizes.clear();
  EXPECT_EQ(first_ids(cfg, &sizes, nullptr).size(), 3 * 56u);
  cfg.drop_last = 0;
  cfg.shuffle = 1;
  cfg.seed = 42;
  std::vector<int64_t> s1 = first_ids(cfg, nullptr, nullptr);
  std::vector<int64_t> s2 = first_ids(cfg, nullptr, nullptr);
  EXPECT_EQ(s1, s2);  // same seed, same order
  EXPECT_NE(s1, plain);
  std::vector<int64_t> e0(s1.begin(), s1.begin() + 60),
      e1(s1.begin() + 60, s1.begin() + 120);
  EXPECT_NE(e0, e1);  // a new order every epoch
  std::sort(e0.begin(), e0.end());
  std::sort(e1.begin(), e1.end());
  EXPECT_EQ(e0, e1);  // the same lines
  cfg.seed = 43;
  EXPECT_NE(first_ids(cfg, nullptr, nullptr), s1);
}

// ---- Bad input --------------------------------------------------------------

struct BadCase {
  std::string line;
  std::string what;
  int column;
};

TEST(Reader, MalformedLinesAreCorruptNamingFileLineColumn) {
  rt::TempDir dir;
  std::mt19937_64 rng(9);
  std::string good = rt::criteo_line(0, rng);
  auto replace_field = [&](int col, const std::string &v) {
    std::vector<std::string> f = rt::split_fields(good);
    f[col - 1] = v;
    std::string out;
    for (size_t i = 0; i < f.size(); ++i) out += (i ? "\t" : "") + f[i];
    return out;
  };
  std::vector<BadCase> cases = {
      {good + "\textra", "too many columns (41 columns, expected 40)", 41},
      {good.substr(0, good.rfind('\t')), "too few columns", 40},
      {replace_field(3, "12a"), "integer feature is not a number", 3},
      {replace_field(1, ""), "label is not a number", 1},
      {replace_field(20, "xyz"), "not hexadecimal", 20},
      {replace_field(16, "12345678901234567"), "not hexadecimal", 16},
      {replace_field(5, "nan"), "not a number", 5},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    std::string p = dir.file("bad" + std::to_string(i) + ".tsv");
    std::string text;
    for (int k = 0; k < 5; ++k) text += good + "\n";
    text += cases[i].line + "\n" + good + "\n";
    rt::write_file(p, text);
    for (int64_t chunk : {int64_t{1} << 20, int64_t{300}}) {
      hb_reader_config cfg = HB_READER_CONFIG_INIT;
      cfg.batch_size = 2;
      cfg.chunk_bytes = chunk;
      hb_reader *r = open({p}, cfg);
      std::vector<RefRow> rows;
      EXPECT_EQ(rt::read_all(r, &rows), HB_ERR_CORRUPT);
      std::string msg = hb_last_error();
      EXPECT_NE(
          msg.find(p + ": line 6, column " + std::to_string(cases[i].column)),
          std::string::npos)
          << msg;
      EXPECT_NE(msg.find(cases[i].what), std::string::npos) << msg;
      EXPECT_EQ(rows.size(), 4u);  // the full batches before it
      // Again on every later call.
      hb_reader_batch *b = nullptr;
      EXPECT_EQ(hb_reader_next(r, &b), HB_ERR_CORRUPT);
      EXPECT_EQ(b, nullptr);
      hb_reader_destroy(r);
      // Skipped and counted with skip_bad_lines.
      cfg.skip_bad_lines = 1;
      r = open({p}, cfg);
      rows.clear();
      ASSERT_EQ(rt::read_all(r, &rows), HB_OK) << hb_last_error();
      EXPECT_EQ(rows.size(), 6u);
      EXPECT_EQ(hb_reader_skipped_lines(r), 1u);
      hb_reader_destroy(r);
    }
  }
}

TEST(Reader, LongLinesAreRefusedNotBuffered) {
  rt::TempDir dir;
  std::mt19937_64 rng(10);
  std::string good = rt::criteo_line(0, rng);
  std::string p = dir.file("long.tsv");
  std::string huge(5 << 20, 'a');  // 5 MiB, no newline inside
  rt::write_file(p, good + "\n" + huge + "\n" + good + "\n" + huge);
  hb_reader_config cfg = HB_READER_CONFIG_INIT;
  cfg.max_line_bytes = 4096;
  std::vector<RefRow> rows;
  std::string msg = read_to_corrupt(p, cfg, &rows);
  EXPECT_NE(
      msg.find(p +
               ": line 2: line is longer than max_line_bytes (cap 4096 bytes)"),
      std::string::npos)
      << msg;
  cfg.skip_bad_lines = 1;
  cfg.chunk_bytes = 1 << 20;  // ranges that start inside the long lines
  hb_reader *r = open({p}, cfg);
  rows.clear();
  ASSERT_EQ(rt::read_all(r, &rows), HB_OK) << hb_last_error();
  EXPECT_EQ(rows.size(), 2u);
  EXPECT_EQ(hb_reader_skipped_lines(r), 2u);
  hb_reader_destroy(r);
}

// The cap counts a line without its line end: a line that fits with "\n"
// fits with "\r\n", also when a read ends right after the '\r' (ranges of
// at most 3 KiB fill a 4 KiB buffer; after a 102-byte line, the cap-long
// line and its '\r' fill it exactly). One byte more is still too long.
TEST(Reader, CrlfLinesFitTheCapOfTheirLfForm) {
  rt::TempDir dir;
  const int64_t cap = 4095;
  auto line = [&](int serial, int64_t size) {
    char head[32];
    std::snprintf(head, sizeof head, "1\t%x\t", serial);
    std::string l = head;
    return l + std::string(static_cast<size_t>(size) - l.size(), 'x');
  };
  hb_reader_config cfg = HB_READER_CONFIG_INIT;
  cfg.columns = "LCS";  // label, one categorical, the padding skipped
  cfg.max_line_bytes = cap;
  cfg.batch_size = 1;
  for (const char *end : {"\n", "\r\n"}) {
    std::string p = dir.file(end[0] == '\r' ? "crlf.tsv" : "lf.tsv");
    std::string text;
    for (int i = 0; i < 6; ++i) text += line(i, i % 2 ? cap : 100) + end;
    rt::write_file(p, text);
    for (int64_t chunk : {int64_t{1000}, int64_t{4} << 20}) {
      SCOPED_TRACE(std::string(end[0] == '\r' ? "CRLF" : "LF") + " chunk " +
                   std::to_string(chunk));
      cfg.chunk_bytes = chunk;
      hb_reader *r = open({p}, cfg);
      std::vector<RefRow> rows;
      ASSERT_EQ(rt::read_all(r, &rows), HB_OK) << hb_last_error();
      ASSERT_EQ(rows.size(), 6u);
      for (int i = 0; i < 6; ++i) EXPECT_EQ(rows[i].ids[0], i);
      hb_reader_destroy(r);
    }
    std::string over = dir.file("over.tsv");
    rt::write_file(over, line(0, 100) + end + line(1, cap + 1) + end);
    cfg.chunk_bytes = int64_t{4} << 20;
    std::vector<RefRow> rows;
    std::string msg = read_to_corrupt(over, cfg, &rows);
    EXPECT_NE(msg.find("line 2: line is longer"), std::string::npos) << msg;
  }
}

TEST(Reader, MissingFilesAndBadArguments) {
  rt::TempDir dir;
  const char *missing[] = {"/nonexistent/hb_reader/file.tsv"};
  hb_reader *r = nullptr;
  EXPECT_EQ(hb_reader_create(nullptr, missing, 1, nullptr, &r), HB_ERR_IO);
  EXPECT_NE(
      std::string(hb_last_error()).find("/nonexistent/hb_reader/file.tsv"),
      std::string::npos);
  EXPECT_EQ(r, nullptr);
  std::string pattern = dir.file("*.nothing");
  const char *pat[] = {pattern.c_str()};
  EXPECT_EQ(hb_reader_create(nullptr, pat, 1, nullptr, &r), HB_ERR_IO);
  EXPECT_NE(std::string(hb_last_error()).find("matches no file"),
            std::string::npos);
  const char *d[] = {dir.path.c_str()};
  EXPECT_EQ(hb_reader_create(nullptr, d, 1, nullptr, &r), HB_ERR_IO);
  EXPECT_EQ(hb_reader_create(nullptr, nullptr, 0, nullptr, &r),
            HB_ERR_INVALID_ARGUMENT);
  std::string ok = dir.file("ok.tsv");
  rt::write_file(ok, "");
  const char *okp[] = {ok.c_str()};
  hb_reader_config cfg = HB_READER_CONFIG_INIT;
  cfg.columns = "LIX";
  EXPECT_EQ(hb_reader_create(nullptr, okp, 1, &cfg, &r),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hb_last_error()).find("'X'"), std::string::npos);
  cfg = HB_READER_CONFIG_INIT;
  cfg.batch_size = 0;
  EXPECT_EQ(hb_reader_create(nullptr, okp, 1, &cfg, &r),
            HB_ERR_INVALID_ARGUMENT);
  cfg = HB_READER_CONFIG_INIT;
  cfg.num_shards = 2;
  cfg.shard_index = 2;
  EXPECT_EQ(hb_reader_create(nullptr, okp, 1, &cfg, &r),
            HB_ERR_INVALID_ARGUMENT);
  // A glob expands sorted; an empty file gives no batch.
  std::string glob = dir.file("*.tsv");
  const char *g[] = {glob.c_str()};
  ASSERT_EQ(hb_reader_create(nullptr, g, 1, nullptr, &r), HB_OK);
  EXPECT_EQ(hb_reader_num_files(r), 1);
  hb_reader_batch *b = reinterpret_cast<hb_reader_batch *>(1);
  EXPECT_EQ(hb_reader_next(r, &b), HB_OK);
  EXPECT_EQ(b, nullptr);
  hb_reader_destroy(r);
  hb_reader_destroy(nullptr);
  hb_reader_batch_free(nullptr);
}

TEST(Reader, TruncatedAndDamagedGzipAreCorrupt) {
  rt::TempDir dir;
  std::mt19937_64 rng(11);
  std::string text;
  for (int i = 0; i < 2000; ++i) text += rt::criteo_line(i, rng) + "\n";
  std::string full = dir.file("full.gz");
  rt::write_gzip(full, text);
  std::string bytes = rt::read_file(full);
  std::string cut = dir.file("cut.gz");
  rt::write_file(cut, bytes.substr(0, bytes.size() / 2));
  std::string bad = dir.file("bad.gz");
  std::string damaged = bytes;
  for (size_t i = 100; i < 200; ++i) damaged[i] ^= 0x5a;
  rt::write_file(bad, damaged);
  for (const std::string &p : {cut, bad}) {
    hb_reader *r = open({p}, HB_READER_CONFIG_INIT);
    std::vector<RefRow> rows;
    EXPECT_EQ(rt::read_all(r, &rows), HB_ERR_CORRUPT) << p;
    std::string msg = hb_last_error();
    EXPECT_NE(msg.find(p), std::string::npos) << msg;
    EXPECT_NE(msg.find(p == cut ? "truncated gzip" : "gzip"), std::string::npos)
        << msg;
    EXPECT_LT(rows.size(), 2000u);
    hb_reader_destroy(r);
  }
}

// gzip (one member) of a, a full flush, then b; *split: where b's deflate
// blocks start (a byte boundary, thanks to the flush).
std::string gzip_with_flush(const std::string &a, const std::string &b,
                            size_t *split) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY),
            Z_OK);
  std::string out;
  auto run = [&](const std::string &in, int flush) {
    zs.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(in.data()));
    zs.avail_in = static_cast<uInt>(in.size());
    int ret;
    do {
      char buf[1 << 16];
      zs.next_out = reinterpret_cast<Bytef *>(buf);
      zs.avail_out = sizeof buf;
      ret = deflate(&zs, flush);
      out.append(buf, sizeof buf - zs.avail_out);
    } while (zs.avail_out == 0 || (flush == Z_FINISH && ret != Z_STREAM_END));
  };
  run(a, Z_FULL_FLUSH);
  *split = out.size();
  run(b, Z_FINISH);
  deflateEnd(&zs);
  return out;
}

// Damage after 2000 good lines (about 400 KB, more than one read of the
// source): those lines all come out (batches of one: none waits for a
// full batch), then HB_ERR_CORRUPT naming the file, and again after.
TEST(Reader, DamagedGzipDeliversTheLinesBeforeTheDamage) {
  rt::TempDir dir;
  std::mt19937_64 rng(13);
  std::vector<std::string> lines;
  std::string good, rest;
  for (int i = 0; i < 3000; ++i) {
    lines.push_back(rt::criteo_line(i, rng));
    (i < 2000 ? good : rest) += lines.back() + "\n";
  }
  const std::vector<RefRow> want = reference(lines);
  size_t split = 0;
  const std::string flushed = gzip_with_flush(good, rest, &split);
  std::string tmp = dir.file("tmp.gz");
  rt::write_gzip(tmp, good);
  const std::string member1 = rt::read_file(tmp);
  rt::write_gzip(tmp, rest);
  const std::string member2 = rt::read_file(tmp);
  // A deflate block starting with the bits 0, 11 (type 3) is invalid.
  struct Case {
    std::string name, bytes, what;
    size_t exact;  // lines expected, or 0: at least 2000
  };
  std::vector<Case> cases;
  std::string bad = flushed;
  bad[split] = 0x06;
  cases.push_back({"bad_block.gz", bad, "damaged gzip stream", 2000});
  bad = member1 + member2;
  bad[member1.size() + 10] = 0x06;  // after the second member's header
  cases.push_back({"bad_member2.gz", bad, "damaged gzip stream", 2000});
  bad = member1 + member2;
  bad[member1.size() + 3] = 0x20;  // reserved flag bit in its header
  cases.push_back({"bad_header2.gz", bad, "damaged gzip stream", 2000});
  cases.push_back(
      {"cut.gz", flushed.substr(0, split + 20), "truncated gzip stream", 0});
  cases.push_back({"cut_member2.gz", member1 + member2.substr(0, 5),
                   "truncated gzip stream", 2000});
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    std::string p = dir.file(c.name);
    rt::write_file(p, c.bytes);
    hb_reader_config cfg = HB_READER_CONFIG_INIT;
    cfg.batch_size = 1;
    std::vector<RefRow> rows;
    std::string msg = read_to_corrupt(p, cfg, &rows);
    EXPECT_NE(msg.find(p + "': " + c.what), std::string::npos) << msg;
    if (c.exact) EXPECT_EQ(rows.size(), c.exact);
    ASSERT_GE(rows.size(), 2000u);
    ASSERT_LT(rows.size(), 3000u);
    rows.resize(2000);
    rt::expect_rows_equal(
        rows, std::vector<RefRow>(want.begin(), want.begin() + 2000));
  }
}

TEST(Reader, ParseLineEntryPoint) {
  std::mt19937_64 rng(12);
  std::string l = rt::criteo_line(77, rng) + "\r";
  float label, dense[rt::kDense];
  int64_t ids[rt::kSparse];
  int32_t present[rt::kSparse];
  ASSERT_EQ(hb_reader_parse_line(nullptr, l.data(), l.size(), &label, dense,
                                 ids, present),
            HB_OK);
  RefRow want = rt::ref_parse(l.substr(0, l.size() - 1));
  EXPECT_EQ(label, want.label);
  EXPECT_EQ(std::vector<float>(dense, dense + rt::kDense), want.dense);
  for (int f = 0; f < rt::kSparse; ++f)
    EXPECT_EQ(present[f] ? ids[f] : -1, want.ids[f]);
  EXPECT_EQ(
      hb_reader_parse_line(nullptr, "1\t2", 3, &label, dense, ids, present),
      HB_ERR_CORRUPT);
  EXPECT_NE(std::string(hb_last_error()).find("column 3: too few columns"),
            std::string::npos)
      << hb_last_error();
}

}  // namespace
