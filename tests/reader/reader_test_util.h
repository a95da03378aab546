// Helpers for the reader tests: temporary files (plain and gzip), Criteo-
// layout lines, an independent reference parser (std::string + strtof /
// strtoull, nothing shared with src/reader) and a batch reader.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "hb.h"

namespace rt {

constexpr int kDense = 13, kSparse = 26;

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/hb_reader_XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
  std::string file(const std::string &name) const { return path + "/" + name; }
};

inline void write_file(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

inline void write_gzip(const std::string &path, const std::string &bytes) {
  gzFile gz = gzopen(path.c_str(), "wb");
  ASSERT_TRUE(gz);
  if (!bytes.empty())
    gzwrite(gz, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(gz);
}

inline std::string read_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// One Criteo line whose first categorical is the serial number (so a test
// can tell which lines it got), with some empty fields and varied numbers.
inline std::string criteo_line(uint64_t serial, std::mt19937_64 &rng) {
  std::string s = std::to_string(rng() % 2);
  for (int j = 0; j < kDense; ++j) {
    s += '\t';
    uint64_t r = rng();
    if (r % 7 == 0) continue;  // missing
    if (r % 11 == 0) s += "-";
    s += std::to_string((r >> 8) % 100000);
  }
  char hex[32];
  std::snprintf(hex, sizeof hex, "\t%llx",
                static_cast<unsigned long long>(serial));
  s += hex;
  for (int f = 1; f < kSparse; ++f) {
    s += '\t';
    uint64_t r = rng();
    if (r % 5 == 0) continue;  // missing: an empty bag
    std::snprintf(hex, sizeof hex, "%08llx",
                  static_cast<unsigned long long>((r >> 16) & 0xffffffffull));
    s += hex;
  }
  return s;
}

struct RefRow {
  float label = 0;
  std::vector<float> dense;
  std::vector<int64_t> ids;  // -1: empty
};

inline std::vector<std::string> split_fields(const std::string &line) {
  std::vector<std::string> f;
  size_t b = 0;
  for (;;) {
    size_t e = line.find('\t', b);
    f.push_back(line.substr(b, e == std::string::npos ? e : e - b));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  return f;
}

// The reference: split on tabs, strtof for numbers, strtoull(16) for hex.
inline RefRow ref_parse(const std::string &line, bool log_dense = false) {
  std::vector<std::string> f = split_fields(line);
  EXPECT_EQ(f.size(), 1u + kDense + kSparse);
  RefRow r;
  r.label = std::strtof(f[0].c_str(), nullptr);
  for (int j = 0; j < kDense; ++j) {
    float v = f[1 + j].empty() ? 0.0f : std::strtof(f[1 + j].c_str(), nullptr);
    if (log_dense) v = static_cast<float>(std::log1p(v > 0 ? double{v} : 0.0));
    r.dense.push_back(v);
  }
  for (int k = 0; k < kSparse; ++k) {
    const std::string &h = f[1 + kDense + k];
    r.ids.push_back(h.empty() ? -1
                              : static_cast<int64_t>(
                                    std::strtoull(h.c_str(), nullptr, 16)));
  }
  return r;
}

// Lines of text (any line end), without blank lines.
inline std::vector<std::string> split_lines(const std::string &text) {
  std::vector<std::string> out;
  size_t b = 0;
  while (b < text.size()) {
    size_t e = text.find('\n', b);
    std::string l = text.substr(b, e == std::string::npos ? e : e - b);
    if (!l.empty() && l.back() == '\r') l.pop_back();
    if (!l.empty()) out.push_back(l);
    if (e == std::string::npos) break;
    b = e + 1;
  }
  return out;
}

// Every row of every batch, as RefRows, in order.
inline hb_status read_all(hb_reader *r, std::vector<RefRow> *rows,
                          std::vector<int64_t> *sizes = nullptr) {
  for (;;) {
    hb_reader_batch *b = nullptr;
    hb_status st = hb_reader_next(r, &b);
    if (st != HB_OK) return st;
    if (!b) return HB_OK;
    const int64_t n = b->size;
    EXPECT_EQ(b->offsets[0], 0);
    EXPECT_EQ(b->offsets[b->num_sparse * n], b->num_ids);
    if (sizes) sizes->push_back(n);
    for (int64_t i = 0; i < n; ++i) {
      RefRow row;
      row.label = b->labels[i];
      row.dense.assign(b->dense + i * b->num_dense,
                       b->dense + (i + 1) * b->num_dense);
      for (int f = 0; f < b->num_sparse; ++f) {
        int64_t lo = b->offsets[f * n + i], hi = b->offsets[f * n + i + 1];
        EXPECT_TRUE(hi - lo == 0 || hi - lo == 1);
        row.ids.push_back(hi > lo ? b->ids[lo] : -1);
      }
      rows->push_back(std::move(row));
    }
    hb_reader_batch_free(b);
  }
}

inline void expect_rows_equal(const std::vector<RefRow> &got,
                              const std::vector<RefRow> &want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].label, want[i].label) << "row " << i;
    ASSERT_EQ(got[i].dense, want[i].dense) << "row " << i;
    ASSERT_EQ(got[i].ids, want[i].ids) << "row " << i;
  }
}

}  // namespace rt
