#include "embedding/checkpoint.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstring>
#include <random>
#include <sstream>
#include <vector>

#include "abi/error.h"
#include "common/bytes.h"
#include "common/file_io.h"
#include "common/log.h"
#include "embedding/lifecycle/checkpoint_state.h"

namespace hb {
namespace emb {

std::function<void(const char *phase)> g_save_test_hook;

namespace {

const char kShardMagic[8] = {'H', 'B', 'E', 'M', 'B', 'S', 'H', '1'};
// Version 1: rows only. Version 2 (tables with a lifecycle): each shard file
// continues with the lifecycle section (lifecycle/checkpoint_state.h).
// Both load.
const uint32_t kVersion = 1;
const uint32_t kVersionLifecycle = 2;
const size_t kShardHeader = 8 + 4 + 4 + 8 * 3 + 4 + 4;

std::string hex16(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016" PRIx64, v);
  return b;
}

std::string join(const std::string &dir, const std::string &file) {
  return dir.back() == '/' ? dir + file : dir + "/" + file;
}

struct ShardEntry {
  int rank;
  std::string file;
  uint64_t bytes, rows, checksum;
};

struct Manifest {
  uint32_t version = kVersion;
  std::string name;
  int64_t dim = 0, num_rows = -1, record_words = 0;
  int32_t optimizer = -1, partition = -1;
  int world = 0;
  uint64_t nonce = 0;
  std::vector<ShardEntry> shards;
};

std::string render_manifest(const Manifest &m) {
  std::ostringstream o;
  o << "hb-embedding-checkpoint " << m.version << "\n"
    << "name " << m.name << "\n"
    << "dim " << m.dim << "\n"
    << "num_rows " << m.num_rows << "\n"
    << "optimizer " << m.optimizer << "\n"
    << "record_words " << m.record_words << "\n"
    << "partition " << m.partition << "\n"
    << "world " << m.world << "\n"
    << "nonce " << hex16(m.nonce) << "\n";
  for (const ShardEntry &s : m.shards)
    o << "shard " << s.rank << " " << s.file << " " << s.bytes << " " << s.rows
      << " " << hex16(s.checksum) << "\n";
  std::string body = o.str();
  return body + "checksum " + hex16(checksum64(body.data(), body.size())) +
         "\n";
}

Manifest parse_manifest(const std::string &path, const std::string &text) {
  size_t cpos = text.rfind("checksum ");
  if (cpos == std::string::npos || (cpos > 0 && text[cpos - 1] != '\n'))
    fail(HB_ERR_CORRUPT, "manifest '%s': no checksum line (truncated?)",
         path.c_str());
  uint64_t want = checksum64(text.data(), cpos);
  unsigned long long got = 0;
  if (std::sscanf(text.c_str() + cpos, "checksum %16llx", &got) != 1 ||
      got != want)
    fail(HB_ERR_CORRUPT, "manifest '%s': checksum mismatch at byte %zu",
         path.c_str(), cpos);
  Manifest m;
  std::istringstream in(text.substr(0, cpos));
  std::string line;
  int version = 0;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string key;
    ls >> key;
    if (key == "hb-embedding-checkpoint")
      ls >> version;
    else if (key == "name")
      ls >> m.name;
    else if (key == "dim")
      ls >> m.dim;
    else if (key == "num_rows")
      ls >> m.num_rows;
    else if (key == "optimizer")
      ls >> m.optimizer;
    else if (key == "record_words")
      ls >> m.record_words;
    else if (key == "partition")
      ls >> m.partition;
    else if (key == "world")
      ls >> m.world;
    else if (key == "nonce")
      ls >> std::hex >> m.nonce;
    else if (key == "shard") {
      ShardEntry s;
      ls >> s.rank >> s.file >> s.bytes >> s.rows >> std::hex >> s.checksum;
      if (ls.fail())
        fail(HB_ERR_CORRUPT, "manifest '%s': bad line '%s'", path.c_str(),
             line.c_str());
      m.shards.push_back(s);
    }
  }
  if (version != static_cast<int>(kVersion) &&
      version != static_cast<int>(kVersionLifecycle))
    fail(HB_ERR_CORRUPT, "manifest '%s': unknown format version %d",
         path.c_str(), version);
  m.version = static_cast<uint32_t>(version);
  if (m.world <= 0 || static_cast<int>(m.shards.size()) != m.world)
    fail(HB_ERR_CORRUPT, "manifest '%s': %zu shard lines for world %d",
         path.c_str(), m.shards.size(), m.world);
  for (int r = 0; r < m.world; ++r)
    if (m.shards[r].rank != r ||
        m.shards[r].file.find('/') != std::string::npos)
      fail(HB_ERR_CORRUPT, "manifest '%s': bad shard line %d", path.c_str(), r);
  return m;
}

std::vector<std::string> list_dir(const std::string &dir) {
  std::vector<std::string> out;
  DIR *d = ::opendir(dir.c_str());
  if (!d) return out;
  while (struct dirent *e = ::readdir(d)) out.push_back(e->d_name);
  ::closedir(d);
  return out;
}

// Is `file` a shard file (or its temporary) of table `name` from a save
// other than `keep`?
bool stale_shard_file(const std::string &file, const std::string &name,
                      uint64_t keep) {
  if (file.compare(0, name.size() + 1, name + ".") != 0) return false;
  std::string rest = file.substr(name.size() + 1);
  if (rest.size() < 24 || rest.compare(16, 7, ".shard-") != 0) return false;
  for (int i = 0; i < 16; ++i)
    if (!std::isxdigit(static_cast<unsigned char>(rest[i]))) return false;
  return rest.compare(0, 16, hex16(keep)) != 0 ||
         (rest.size() > 4 && rest.compare(rest.size() - 4, 4, ".tmp") == 0);
}

// The shard file format (docs/embedding-format.md): header, then per row
// its id and record, then the table's lifecycle section if it has one
// (life_state: lifecycle::encode_state's bytes).
void write_records(int64_t dim, int64_t words, int64_t rows,
                   const RecordSource &each, const std::string *life_state,
                   const std::string &path, int rank, int world,
                   uint64_t *bytes, uint64_t *checksum) {
  AtomicFile f(path);
  uint32_t version = life_state ? kVersionLifecycle : kVersion, zero = 0;
  int32_t r32 = rank, w32 = world;
  f.write(kShardMagic, 8);
  f.write(&version, 4);
  f.write(&zero, 4);
  f.write(&dim, 8);
  f.write(&words, 8);
  f.write(&rows, 8);
  f.write(&r32, 4);
  f.write(&w32, 4);
  int64_t n = 0;
  each([&](int64_t id, const float *rec) {
    f.write(&id, 8);
    f.write(rec, static_cast<size_t>(words) * 4);
    ++n;
  });
  if (n != rows)
    fail(HB_ERR_INTERNAL, "checkpoint shard '%s': %lld rows, header says %lld",
         path.c_str(), (long long)n, (long long)rows);
  if (life_state) f.write(life_state->data(), life_state->size());
  f.commit();
  *bytes = f.bytes();
  *checksum = f.checksum();
}

void write_shard(const Table &t, const std::string &path, int rank, int world,
                 ShardEntry *entry) {
  const Shard &shard = t.shard();
  std::string life;
  if (t.life())
    life = lifecycle::encode_state(shard, *t.row_meta(), t.life()->admission());
  write_records(
      shard.spec().dim, shard.record_words(), shard.rows(),
      [&](const RecordVisitor &f) { shard.for_each(f); },
      t.life() ? &life : nullptr, path, rank, world, &entry->bytes,
      &entry->checksum);
  entry->rows = static_cast<uint64_t>(shard.rows());
}

// Reads one shard file and puts the rows `into` owns into it.
void read_shard(const std::string &dir, const ShardEntry &e, const Manifest &m,
                const Partitioner &part, int rank, int world, Shard *into,
                IdMap *seen, lifecycle::LoadedState *state) {
  std::string path = join(dir, e.file);
  std::string data;
  try {
    data = read_whole_file(path);
  } catch (const Error &err) {
    // The manifest names it: a missing or unreadable shard is a broken
    // checkpoint, not a plain I/O error.
    fail(HB_ERR_CORRUPT,
         "checkpoint shard '%s' named by the manifest is missing or "
         "unreadable: %s",
         path.c_str(), err.what());
  }
  if (data.size() != e.bytes)
    fail(HB_ERR_CORRUPT,
         "checkpoint shard '%s' has %zu bytes, manifest says %" PRIu64,
         path.c_str(), data.size(), e.bytes);
  if (checksum64(data.data(), data.size()) != e.checksum)
    fail(HB_ERR_CORRUPT, "checkpoint shard '%s': checksum mismatch",
         path.c_str());
  ByteReader rd(data, "checkpoint shard '" + path + "'");
  if (std::memcmp(rd.take(8, "magic"), kShardMagic, 8) != 0)
    fail(HB_ERR_CORRUPT, "%s: bad magic at byte 0", rd.what().c_str());
  uint32_t version = rd.get<uint32_t>("version");
  rd.get<uint32_t>("reserved");
  int64_t dim = rd.get<int64_t>("dim"), words = rd.get<int64_t>("record_words"),
          rows = rd.get<int64_t>("rows");
  int32_t r = rd.get<int32_t>("rank"), w = rd.get<int32_t>("world");
  const uint64_t row_bytes = static_cast<uint64_t>(rows) * (8 + 4 * words);
  const bool life = version == kVersionLifecycle;
  if (version != m.version || dim != m.dim || words != m.record_words ||
      rows != static_cast<int64_t>(e.rows) || r != e.rank || w != m.world ||
      (life ? row_bytes > rd.left() : row_bytes != rd.left()))
    fail(HB_ERR_CORRUPT,
         "%s: header disagrees with the manifest or the file size",
         rd.what().c_str());
  std::vector<int64_t> file_ids;
  if (life) file_ids.reserve(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) {
    int64_t id = rd.get<int64_t>("id");
    if (life) file_ids.push_back(id);
    const char *rec = rd.take(static_cast<size_t>(words) * 4, "row");
    if (m.num_rows > 0 && (id < 0 || id >= m.num_rows))
      fail(HB_ERR_CORRUPT, "%s: id %lld at byte %zu outside [0, %lld)",
           rd.what().c_str(), (long long)id, rd.pos() - words * 4 - 8,
           (long long)m.num_rows);
    if (part.owner(id) != rank) continue;
    bool inserted;
    seen->insert(id, 0, &inserted);
    if (!inserted)
      fail(HB_ERR_CORRUPT, "%s: id %lld appears twice in the checkpoint",
           rd.what().c_str(), (long long)id);
    // Records start 4-byte aligned (48-byte header, 8 + 4 * words each).
    into->put(id, reinterpret_cast<const float *>(rec));
  }
  if (life) {
    lifecycle::read_state(
        rd, file_ids, [&](int64_t id) { return part.owner(id) == rank; },
        m.world == world && e.rank == rank, state);
    if (rd.left() != 0)
      fail(HB_ERR_CORRUPT, "%s: %zu bytes after the lifecycle section",
           rd.what().c_str(), rd.left());
  }
}

}  // namespace

uint64_t fresh_nonce() {
  std::random_device rd;
  uint64_t t = static_cast<uint64_t>(
      std::chrono::steady_clock::now().time_since_epoch().count());
  return (static_cast<uint64_t>(rd()) << 32 ^ rd()) ^
         (t * 0x9E3779B97F4A7C15ull) ^ static_cast<uint64_t>(::getpid());
}

// mkdir -p: the directory and any missing parent.
void make_dirs(const std::string &what, const std::string &dir) {
  for (size_t at = 1; at <= dir.size(); ++at) {
    if (at < dir.size() && dir[at] != '/') continue;
    std::string part = dir.substr(0, at);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST)
      fail(HB_ERR_IO, "%s: cannot create directory '%s': %s", what.c_str(),
           part.c_str(), std::strerror(errno));
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    fail(HB_ERR_IO, "%s: '%s' is not a directory", what.c_str(), dir.c_str());
}

ShardFile write_shard_file(const Spec &spec, int64_t record_words, int64_t rows,
                           const RecordSource &each,
                           const std::string *life_state,
                           const std::string &dir, uint64_t nonce, int rank,
                           int world) {
  ShardFile out;
  out.file = shard_file_name(spec.name, nonce, rank, world);
  out.rows = static_cast<uint64_t>(rows);
  write_records(spec.dim, record_words, rows, each, life_state,
                join(dir, out.file), rank, world, &out.bytes, &out.checksum);
  return out;
}

void write_manifest(const Spec &spec, int64_t record_words, uint64_t nonce,
                    const std::vector<ShardFile> &shards,
                    const std::string &dir) {
  Manifest m;
  m.version = spec.life.enabled ? kVersionLifecycle : kVersion;
  m.name = spec.name;
  m.dim = spec.dim;
  m.num_rows = spec.num_rows;
  m.optimizer = spec.optimizer;
  m.record_words = record_words;
  m.partition = spec.partition;
  m.world = static_cast<int>(shards.size());
  m.nonce = nonce;
  for (size_t p = 0; p < shards.size(); ++p)
    m.shards.push_back({static_cast<int>(p), shards[p].file, shards[p].bytes,
                        shards[p].rows, shards[p].checksum});
  std::string text = render_manifest(m);
  AtomicFile f(join(dir, spec.name + ".manifest"));
  f.write(text.data(), text.size());
  f.commit();
}

void remove_stale_shards(const Spec &spec, const std::string &dir,
                         uint64_t nonce, const std::string &what) {
  for (const std::string &f : list_dir(dir))
    if (stale_shard_file(f, spec.name, nonce) &&
        ::unlink(join(dir, f).c_str()) != 0)
      HB_LOG_WARN("%s: cannot remove stale '%s': %s", what.c_str(), f.c_str(),
                  std::strerror(errno));
}

std::string shard_file_name(const std::string &table, uint64_t nonce, int rank,
                            int world) {
  return table + "." + hex16(nonce) + ".shard-" + std::to_string(rank) +
         "-of-" + std::to_string(world);
}

void save_checkpoint(Table &t, const char *dir_c) {
  Exchange &x = t.exchange();
  const int rank = x.rank(), world = x.world();
  const Spec &spec = t.spec();
  const std::string what = "hb_embedding_save('" + spec.name + "')";

  // 1. Rank 0 prepares the directory and picks the nonce of this save.
  Outcome o;
  o.sig = t.call(kCallSave);
  uint64_t nonce = 0;
  std::string dir;
  try {
    HB_CHECK_ARG(dir_c && dir_c[0], "%s: dir is NULL or empty", what.c_str());
    dir = dir_c;
    if (rank == 0) {
      make_dirs(what, dir);
      nonce = fresh_nonce();
    }
  } catch (...) {
    o.capture();
  }
  nonce = static_cast<uint64_t>(
      agree(x, o, std::vector<int64_t>(world, static_cast<int64_t>(nonce)),
            what.c_str(), nullptr)[0]);

  // 2. Every rank commits its shard file.
  Outcome o2;
  ShardEntry mine{rank, shard_file_name(spec.name, nonce, rank, world), 0, 0,
                  0};
  try {
    write_shard(t, join(dir, mine.file), rank, world, &mine);
  } catch (...) {
    o2.capture();
  }
  agree(x, o2, what.c_str());
  std::vector<int64_t> send(3 * world), recv(3 * world);
  for (int p = 0; p < world; ++p) {
    send[3 * p] = static_cast<int64_t>(mine.bytes);
    send[3 * p + 1] = static_cast<int64_t>(mine.rows);
    send[3 * p + 2] = static_cast<int64_t>(mine.checksum);
  }
  x.alltoall(send.data(), recv.data(), 3);
  if (g_save_test_hook) g_save_test_hook("shards_written");

  // 3. Rank 0 commits the manifest: from here on the new save is the one
  // a load finds.
  Outcome o3;
  if (rank == 0) {
    try {
      std::vector<ShardFile> files;
      for (int p = 0; p < world; ++p)
        files.push_back({shard_file_name(spec.name, nonce, p, world),
                         static_cast<uint64_t>(recv[3 * p]),
                         static_cast<uint64_t>(recv[3 * p + 1]),
                         static_cast<uint64_t>(recv[3 * p + 2])});
      write_manifest(spec, t.shard().record_words(), nonce, files, dir);
    } catch (...) {
      o3.capture();
    }
  }
  agree(x, o3, what.c_str());

  // 4. Older saves (and temporaries of crashed ones) are garbage now.
  if (rank == 0) remove_stale_shards(spec, dir, nonce, what);
}

std::unique_ptr<Shard> read_checkpoint(const Spec &spec, int64_t record_words,
                                       const char *dir_c, int rank, int world,
                                       lifecycle::LoadedState *state) {
  const std::string what = "hb_embedding_load('" + spec.name + "')";
  try {
    HB_CHECK_ARG(dir_c && dir_c[0], "%s: dir is NULL or empty", what.c_str());
    std::string dir = dir_c;
    std::string path = join(dir, spec.name + ".manifest");
    if (!file_exists(path)) {
      std::string others;
      for (const std::string &f : list_dir(dir))
        if (f.size() > 9 && f.compare(f.size() - 9, 9, ".manifest") == 0)
          others += (others.empty() ? "" : ", ") + f.substr(0, f.size() - 9);
      if (!others.empty())
        fail(HB_ERR_INVALID_ARGUMENT,
             "%s: '%s' has no checkpoint of this table (it has: %s)",
             what.c_str(), dir_c, others.c_str());
      fail(HB_ERR_IO, "%s: no checkpoint '%s'", what.c_str(), path.c_str());
    }
    Manifest m = parse_manifest(path, read_whole_file(path));
    if (m.name != spec.name)
      fail(HB_ERR_INVALID_ARGUMENT, "%s: '%s' is a checkpoint of table '%s'",
           what.c_str(), path.c_str(), m.name.c_str());
    if (m.dim != spec.dim)
      fail(HB_ERR_INVALID_ARGUMENT,
           "%s: checkpoint has dim %lld, table has dim %lld", what.c_str(),
           (long long)m.dim, (long long)spec.dim);
    if (m.num_rows != spec.num_rows)
      fail(HB_ERR_INVALID_ARGUMENT,
           "%s: checkpoint has num_rows %lld, table has %lld", what.c_str(),
           (long long)m.num_rows, (long long)spec.num_rows);
    if (m.optimizer != spec.optimizer)
      fail(HB_ERR_INVALID_ARGUMENT,
           "%s: checkpoint has optimizer %d, table has %d (different slots)",
           what.c_str(), m.optimizer, spec.optimizer);
    if (m.record_words != record_words)
      fail(HB_ERR_CORRUPT, "%s: checkpoint rows have %lld words, expected %lld",
           what.c_str(), (long long)m.record_words, (long long)record_words);
    std::unique_ptr<Shard> staging(new Shard(spec, rank, world));
    Partitioner part(spec, world);
    IdMap seen;
    lifecycle::LoadedState ignored;
    for (const ShardEntry &e : m.shards)
      read_shard(dir, e, m, part, rank, world, staging.get(), &seen,
                 state ? state : &ignored);
    return staging;
  } catch (const Error &e) {
    // Every load error names the table.
    std::string msg = e.what();
    if (msg.compare(0, what.size(), what) != 0) msg = what + ": " + msg;
    throw Error(e.status(), msg);
  }
}

void load_checkpoint(Table &t, const char *dir_c) {
  Exchange &x = t.exchange();
  const int rank = x.rank(), world = x.world();
  const std::string what = "hb_embedding_load('" + t.spec().name + "')";
  Outcome o;
  o.sig = t.call(kCallLoad);
  std::unique_ptr<Shard> staging;
  lifecycle::LoadedState state;
  try {
    staging = read_checkpoint(t.spec(), t.shard().record_words(), dir_c, rank,
                              world, &state);
  } catch (...) {
    o.capture();
  }
  agree(x, o, what.c_str());
  t.replace_shard(std::move(staging));
  lifecycle::restore_state(t, state);
}

}  // namespace emb
}  // namespace hb
