// The C entry points of the reader (hb.h, EXPERIMENTAL section).
#include <algorithm>
#include <cstdlib>
#include <vector>

#include "abi/error.h"
#include "context/context.h"
#include "reader/handle.h"
#include "reader/line_parser.h"

using hb::reader::Settings;

extern "C" hb_status hb_reader_create(hb_context *ctx, const char *const *paths,
                                      size_t num_paths,
                                      const hb_reader_config *cfg,
                                      hb_reader **out) {
  return hb::guard([&] {
    HB_CHECK_ARG(out, "hb_reader_create: out is NULL");
    *out = nullptr;
    Settings s = hb::reader::settings_from_config(cfg);
    int shard = 0, shards = 1;
    if (s.num_shards > 0) {
      HB_CHECK_ARG(s.shard_index >= 0 && s.shard_index < s.num_shards,
                   "hb_reader_config.shard_index = %d is outside [0, %d)",
                   s.shard_index, s.num_shards);
      shard = s.shard_index;
      shards = s.num_shards;
    } else if (ctx) {
      shard = ctx->cluster.rank;
      shards = ctx->cluster.world_size;
    }
    auto files = hb::reader::expand_files(paths, num_paths);
    auto r = std::make_unique<hb_reader>();
    r->impl = std::make_unique<hb::reader::Reader>(std::move(files),
                                                   std::move(s), shard, shards);
    *out = r.release();
  });
}

extern "C" void hb_reader_destroy(hb_reader *r) { delete r; }

extern "C" hb_status hb_reader_next(hb_reader *r, hb_reader_batch **out) {
  return hb::guard([&] {
    HB_CHECK_ARG(out, "hb_reader_next: out is NULL");
    *out = nullptr;
    HB_CHECK_ARG(r, "hb_reader_next: reader is NULL");
    *out = r->impl->next();
  });
}

extern "C" void hb_reader_batch_free(hb_reader_batch *b) { std::free(b); }

extern "C" uint64_t hb_reader_lines(const hb_reader *r) {
  return r ? r->impl->lines() : 0;
}

extern "C" uint64_t hb_reader_skipped_lines(const hb_reader *r) {
  return r ? r->impl->skipped() : 0;
}

extern "C" int64_t hb_reader_num_files(const hb_reader *r) {
  return r ? r->impl->num_files() : 0;
}

namespace {

// The files laid end to end (dynamic splits): each one's offset there, and
// the total; a gzip file cannot be cut.
int64_t lay_out(const hb_reader &r, std::vector<int64_t> *start) {
  int64_t at = 0;
  for (const hb::reader::FileInfo &f : r.impl->files()) {
    if (f.gzip)
      hb::fail(HB_ERR_UNSUPPORTED,
               "dynamic splits: '%s' is gzip, which cannot be cut into byte "
               "ranges (decompress it, or use one split per file)",
               f.path.c_str());
    if (start) start->push_back(at);
    at += f.size;
  }
  return at;
}

}  // namespace

extern "C" hb_status hb_reader_total_bytes(const hb_reader *r, int64_t *out) {
  return hb::guard([&] {
    HB_CHECK_ARG(r && out, "hb_reader_total_bytes: reader or out is NULL");
    *out = lay_out(*r, nullptr);
  });
}

extern "C" hb_status hb_reader_seek_split(hb_reader *r, int64_t from,
                                          int64_t end) {
  return hb::guard([&] {
    HB_CHECK_ARG(r, "hb_reader_seek_split: reader is NULL");
    std::vector<int64_t> start;
    const int64_t total = lay_out(*r, &start);
    HB_CHECK_ARG(0 <= from && from <= end && end <= total,
                 "hb_reader_seek_split: [%lld, %lld) is not a range of the "
                 "files' %lld bytes",
                 static_cast<long long>(from), static_cast<long long>(end),
                 static_cast<long long>(total));
    const hb::reader::Reader &old = *r->impl;
    std::vector<int> order(old.files().size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    hb::reader::Sequence seq;
    seq.prefix = hb::reader::plan_range(old.files(), order, from, end,
                                        old.settings().chunk_bytes);
    Settings s = old.settings();
    s.num_epochs = 1;  // the split only: no planned epoch after it
    s.drop_last = 0;   // a dropped line would never be read (exactly once)
    seq.first_epoch = 1;
    auto files = old.files();
    const uint64_t lines = old.lines(), skipped = old.skipped();
    r->impl.reset();  // its threads stop before the new ones start
    r->impl = std::make_unique<hb::reader::Reader>(
        std::move(files), std::move(s), 0, 1, std::move(seq), lines, skipped);
    r->split = true;
    r->split_end = end;
    r->file_start = std::move(start);
  });
}

extern "C" hb_status hb_reader_split_offset(const hb_reader *r, int64_t *out) {
  return hb::guard([&] {
    HB_CHECK_ARG(r && out, "hb_reader_split_offset: reader or out is NULL");
    HB_CHECK_ARG(r->split,
                 "hb_reader_split_offset: the reader is not reading a split "
                 "(hb_reader_seek_split)");
    const hb::reader::Reader &rd = *r->impl;
    const hb::reader::Position p = rd.position();
    const std::vector<hb::reader::Chunk> &chunks = rd.sequence().prefix;
    int64_t at = r->split_end;
    if (!rd.done() && p.chunk < static_cast<int64_t>(chunks.size())) {
      const hb::reader::Chunk &c = chunks[static_cast<size_t>(p.chunk)];
      // Partly handed out: the rest are the lines after the newline that
      // ends the last one, i.e. those that start in (next_byte - 1, end].
      at = r->file_start[static_cast<size_t>(c.file)] +
           (p.partial ? p.next_byte - 1 : c.begin);
    }
    *out = std::min(at, r->split_end);
  });
}

extern "C" hb_status hb_reader_parse_line(const hb_reader_config *cfg,
                                          const char *line, size_t len,
                                          float *label, float *dense,
                                          int64_t *ids, int32_t *present) {
  return hb::guard([&] {
    HB_CHECK_ARG(line || len == 0, "hb_reader_parse_line: line is NULL");
    HB_CHECK_ARG(label, "hb_reader_parse_line: label is NULL");
    Settings s = hb::reader::settings_from_config(cfg);
    HB_CHECK_ARG(dense || s.num_dense == 0,
                 "hb_reader_parse_line: dense is NULL");
    HB_CHECK_ARG((ids && present) || s.num_sparse == 0,
                 "hb_reader_parse_line: ids or present is NULL");
    std::vector<uint8_t> got(static_cast<size_t>(s.num_sparse));
    if (len > 0 && line[len - 1] == '\r') --len;
    hb::reader::ParseError err;
    if (static_cast<int64_t>(len) > s.max_line_bytes)
      hb::fail(HB_ERR_CORRUPT,
               "hb_reader_parse_line: line of %zu bytes is longer than "
               "max_line_bytes = %lld",
               len, static_cast<long long>(s.max_line_bytes));
    if (!hb::reader::parse_line(s, line ? line : "", len, label, dense, ids,
                                got.data(), &err)) {
      std::string extra;
      if (err.fields > 0)
        extra =
            hb::format(" (%lld columns, expected %zu)",
                       static_cast<long long>(err.fields), s.columns.size());
      hb::fail(HB_ERR_CORRUPT, "hb_reader_parse_line: column %d: %s%s",
               err.column, err.what, extra.c_str());
    }
    for (int f = 0; f < s.num_sparse; ++f) present[f] = got[f];
  });
}
