#include "recovery/manifest.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <cinttypes>
#include <cstdio>
#include <sstream>

#include "abi/error.h"
#include "common/file_io.h"
#include "recovery/layout.h"

namespace hb {
namespace recovery {
namespace {

const int kVersion = 1;

std::string hex16(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016" PRIx64, v);
  return b;
}

bool hex_decode(const std::string &h, std::string *out) {
  if (h == "-") {
    out->clear();
    return true;
  }
  if (h.size() % 2) return false;
  out->resize(h.size() / 2);
  for (size_t i = 0; i < h.size(); i += 2) {
    unsigned v;
    if (std::sscanf(h.c_str() + i, "%2x", &v) != 1 ||
        !std::isxdigit(static_cast<unsigned char>(h[i])) ||
        !std::isxdigit(static_cast<unsigned char>(h[i + 1])))
      return false;
    (*out)[i / 2] = static_cast<char>(v);
  }
  return true;
}

}  // namespace

std::string hex_encode(const std::string &s) {
  if (s.empty()) return "-";  // keeps the field count of a line
  std::string out;
  char b[3];
  for (unsigned char c : s) {
    std::snprintf(b, sizeof b, "%02x", c);
    out += b;
  }
  return out;
}

std::string render_manifest(const Manifest &m) {
  std::ostringstream o;
  o << "hb-job-checkpoint " << kVersion << "\n"
    << "job " << hex_encode(m.job) << "\n"
    << "step " << m.step << "\n"
    << "world " << m.world << "\n"
    << "nonce " << hex16(m.nonce) << "\n"
    << "saved_ns " << m.saved_ns << "\n";
  for (const std::string &it : m.items) o << "item " << it << "\n";
  for (const auto &kv : m.meta)
    o << "meta " << hex_encode(kv.first) << " " << hex_encode(kv.second)
      << "\n";
  for (const FileEntry &f : m.files)
    o << "file " << f.rank << " " << f.path << " " << f.bytes << " "
      << hex16(f.checksum) << "\n";
  std::string body = o.str();
  return body + "checksum " + hex16(checksum64(body.data(), body.size())) +
         "\n";
}

Manifest parse_manifest(const std::string &path, const std::string &text) {
  size_t cpos = text.rfind("checksum ");
  if (cpos == std::string::npos || (cpos > 0 && text[cpos - 1] != '\n'))
    fail(HB_ERR_CORRUPT,
         "job checkpoint manifest '%s': no checksum line "
         "(truncated?)",
         path.c_str());
  unsigned long long got = 0;
  if (std::sscanf(text.c_str() + cpos, "checksum %16llx", &got) != 1 ||
      got != checksum64(text.data(), cpos))
    fail(HB_ERR_CORRUPT, "job checkpoint manifest '%s': checksum mismatch",
         path.c_str());
  Manifest m;
  std::istringstream in(text.substr(0, cpos));
  std::string line;
  int version = 0, lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    std::istringstream ls(line);
    std::string key;
    ls >> key;
    bool ok = true;
    if (key == "hb-job-checkpoint") {
      ok = static_cast<bool>(ls >> version);
    } else if (key == "job") {
      std::string h;
      ok = (ls >> h) && hex_decode(h, &m.job);
    } else if (key == "step") {
      ok = static_cast<bool>(ls >> m.step);
    } else if (key == "world") {
      ok = static_cast<bool>(ls >> m.world);
    } else if (key == "nonce") {
      ok = static_cast<bool>(ls >> std::hex >> m.nonce);
    } else if (key == "saved_ns") {
      ok = static_cast<bool>(ls >> m.saved_ns);
    } else if (key == "item") {
      m.items.push_back(line.size() > 5 ? line.substr(5) : "");
    } else if (key == "meta") {
      std::string hk, hv, k, v;
      ok = (ls >> hk >> hv) && hex_decode(hk, &k) && hex_decode(hv, &v);
      if (ok) m.meta[k] = v;
    } else if (key == "file") {
      FileEntry f;
      ok = static_cast<bool>(ls >> f.rank >> f.path >> f.bytes >> std::hex >>
                             f.checksum) &&
           f.path.find("..") == std::string::npos && f.path[0] != '/';
      if (ok) m.files.push_back(f);
    } else {
      ok = false;
    }
    if (!ok)
      fail(HB_ERR_CORRUPT, "job checkpoint manifest '%s': bad line %d: '%s'",
           path.c_str(), lineno, line.c_str());
  }
  if (version != kVersion)
    fail(HB_ERR_CORRUPT,
         "job checkpoint manifest '%s': unknown format version %d",
         path.c_str(), version);
  if (m.world <= 0 || m.step < 0)
    fail(HB_ERR_CORRUPT, "job checkpoint manifest '%s': bad step or world",
         path.c_str());
  return m;
}

Manifest read_manifest(const std::string &ckpt) {
  std::string path = join_path(ckpt, "MANIFEST");
  if (!file_exists(path))
    fail(HB_ERR_CORRUPT, "'%s' is not a complete job checkpoint (no MANIFEST)",
         ckpt.c_str());
  return parse_manifest(path, read_whole_file(path));
}

const FileEntry *find_file(const Manifest &m, const std::string &rel) {
  for (const FileEntry &f : m.files)
    if (f.path == rel) return &f;
  return nullptr;
}

std::string read_checked(const std::string &ckpt, const FileEntry &e) {
  std::string path = join_path(ckpt, e.path);
  std::string data;
  try {
    data = read_whole_file(path);
  } catch (const Error &err) {
    fail(HB_ERR_CORRUPT,
         "job checkpoint file '%s' named by the manifest is missing or "
         "unreadable: %s",
         path.c_str(), err.what());
  }
  if (data.size() != e.bytes)
    fail(HB_ERR_CORRUPT,
         "job checkpoint file '%s' has %zu bytes, the manifest says %" PRIu64,
         path.c_str(), data.size(), e.bytes);
  if (checksum64(data.data(), data.size()) != e.checksum)
    fail(HB_ERR_CORRUPT, "job checkpoint file '%s': checksum mismatch",
         path.c_str());
  return data;
}

void verify_files(const std::string &ckpt, const Manifest &m, int offset,
                  int stride) {
  std::vector<char> buf(1 << 20);
  for (size_t i = static_cast<size_t>(offset); i < m.files.size();
       i += stride) {
    const FileEntry &e = m.files[i];
    std::string path = join_path(ckpt, e.path);
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      fail(HB_ERR_CORRUPT,
           "job checkpoint file '%s' named by the manifest is missing or "
           "unreadable: %s",
           path.c_str(), std::strerror(errno));
    Checksum sum;
    uint64_t n = 0;
    for (;;) {
      ssize_t got = ::read(fd, buf.data(), buf.size());
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;
      sum.update(buf.data(), static_cast<size_t>(got));
      n += static_cast<uint64_t>(got);
    }
    ::close(fd);
    if (n != e.bytes)
      fail(HB_ERR_CORRUPT,
           "job checkpoint file '%s' has %" PRIu64
           " bytes, the manifest says %" PRIu64,
           path.c_str(), n, e.bytes);
    if (sum.value() != e.checksum)
      fail(HB_ERR_CORRUPT, "job checkpoint file '%s': checksum mismatch",
           path.c_str());
  }
}

bool files_present(const std::string &ckpt, const Manifest &m,
                   std::string *why) {
  for (const FileEntry &f : m.files) {
    std::string path = join_path(ckpt, f.path);
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      *why = "'" + path + "' is missing";
      return false;
    }
    if (static_cast<uint64_t>(st.st_size) != f.bytes) {
      *why = format("'%s' has %lld bytes, the manifest says %llu", path.c_str(),
                    static_cast<long long>(st.st_size),
                    static_cast<unsigned long long>(f.bytes));
      return false;
    }
  }
  return true;
}

}  // namespace recovery
}  // namespace hb
