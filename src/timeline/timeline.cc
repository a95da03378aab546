#include "timeline/timeline.h"

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "abi/error.h"
#include "common/log.h"

namespace hb {
namespace timeline {

namespace detail {

std::atomic<bool> g_on{false};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace detail

namespace {

// Appended to the file in one go once this many events are buffered.
constexpr size_t kFlushEvents = 8192;

struct Event {
  const char *name;
  const char *category;
  int64_t start_ns, end_ns, bytes;
  const char *key;
  int64_t value;
  int tid;
};

int thread_number() {
  static std::atomic<int> next{0};
  thread_local int tid = next.fetch_add(1, std::memory_order_relaxed);
  return tid;
}

void put_string(std::string &out, const char *s) {
  out += '"';
  for (; *s; ++s) {
    unsigned char c = static_cast<unsigned char>(*s);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += *s;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += *s;
    }
  }
  out += '"';
}

void put_int(std::string &out, int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

// ns as microseconds with three decimals (exact: no floating point).
void put_micros(std::string &out, int64_t ns) {
  if (ns < 0) {
    out += '-';
    ns = -ns;
  }
  put_int(out, ns / 1000);
  char frac[4] = {'.', static_cast<char>('0' + ns / 100 % 10),
                  static_cast<char>('0' + ns / 10 % 10),
                  static_cast<char>('0' + ns % 10)};
  out.append(frac, 4);
}

}  // namespace

// The open file. Only one exists at a time (g_current, under g_mu).
class Recording {
 public:
  Recording(const std::string &path, int rank);
  ~Recording();
  const std::string &path() const { return path_; }
  // Appends events and rewrites the closing bracket (under g_mu).
  void append(const std::vector<Event> &events);

 private:
  std::string path_;
  int rank_;
  std::FILE *file_ = nullptr;
  long end_ = 0;  // offset just past the last event
  bool failed_ = false;
};

namespace {

std::mutex g_mu;
Recording *g_current = nullptr;     // under g_mu
std::weak_ptr<Recording> g_shared;  // under g_mu

// Events not yet in the file (under g_mu). Never destroyed: a thread may
// still end a span while the process exits.
std::vector<Event> &buffer() {
  static auto *events = new std::vector<Event>;
  return *events;
}

// Writes the buffer to the current file and detaches it (under g_mu).
void stop_current() {
  if (!g_current) return;
  g_current->append(buffer());
  buffer().clear();
  g_current = nullptr;
  detail::g_on.store(false, std::memory_order_relaxed);
}

}  // namespace

Recording::Recording(const std::string &path, int rank)
    : path_(file_for_rank(path, rank)), rank_(rank) {
  file_ = std::fopen(path_.c_str(), "w");
  if (!file_)
    fail(HB_ERR_IO, "timeline: cannot create '%s': %s", path_.c_str(),
         std::strerror(errno));
  std::string head = "[\n";
  std::string name = format("rank %d", rank);
  head += format(
      "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
      "\"args\":{\"name\":",
      rank);
  put_string(head, name.c_str());
  head += "}}";
  std::fwrite(head.data(), 1, head.size(), file_);
  end_ = static_cast<long>(head.size());
  append({});
}

Recording::~Recording() {
  if (file_ && std::fclose(file_) != 0 && !failed_)
    HB_LOG_WARN("timeline: closing '%s': %s", path_.c_str(),
                std::strerror(errno));
}

void Recording::append(const std::vector<Event> &events) {
  if (failed_) return;
  std::string out;
  out.reserve(events.size() * 128 + 4);
  for (const Event &e : events) {
    out += ",\n{\"name\":";
    put_string(out, e.name);
    out += ",\"cat\":";
    put_string(out, e.category);
    // Microseconds of the monotonic clock: ranks on one host line up.
    out += ",\"ph\":\"X\",\"ts\":";
    put_micros(out, e.start_ns);
    out += ",\"dur\":";
    put_micros(out, e.end_ns - e.start_ns);
    out += ",\"pid\":";
    put_int(out, rank_);
    out += ",\"tid\":";
    put_int(out, e.tid);
    if (e.bytes >= 0 || e.key) {
      out += ",\"args\":{";
      if (e.bytes >= 0) {
        out += "\"bytes\":";
        put_int(out, e.bytes);
      }
      if (e.key) {
        if (e.bytes >= 0) out += ',';
        put_string(out, e.key);
        out += ':';
        put_int(out, e.value);
      }
      out += '}';
    }
    out += '}';
  }
  // The closing bracket follows the events at every append, so the file is
  // valid JSON between appends; the next append writes over it.
  bool ok = std::fseek(file_, end_, SEEK_SET) == 0 &&
            std::fwrite(out.data(), 1, out.size(), file_) == out.size();
  end_ += static_cast<long>(out.size());
  ok = ok && std::fputs("\n]\n", file_) >= 0 && std::fflush(file_) == 0;
  if (!ok) {
    failed_ = true;
    HB_LOG_WARN("timeline: writing '%s' failed (%s); recording stops",
                path_.c_str(), std::strerror(errno));
  }
}

namespace detail {

void record(const char *name, const char *category, int64_t start_ns,
            int64_t end_ns, int64_t bytes, const char *key, int64_t value) {
  const int tid = thread_number();
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_current) return;  // stopped while the span ran
  std::vector<Event> &events = buffer();
  events.push_back(
      Event{name, category, start_ns, end_ns, bytes, key, value, tid});
  if (events.size() >= kFlushEvents) {
    g_current->append(events);
    events.clear();
  }
}

}  // namespace detail

std::string file_for_rank(const std::string &path, int rank) {
  const std::string suffix = ".json";
  if (path.size() > suffix.size() &&
      path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0)
    return path.substr(0, path.size() - suffix.size()) + "." +
           std::to_string(rank) + suffix;
  return path + "." + std::to_string(rank) + suffix;
}

std::shared_ptr<Recording> start(const std::string &path, int rank) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (auto running = g_shared.lock()) {
    if (running->path() != file_for_rank(path, rank))
      HB_LOG_WARN(
          "timeline: already recording to '%s' in this process; "
          "'%s' is not written",
          running->path().c_str(), file_for_rank(path, rank).c_str());
    return running;
  }
  // exit() without hb_context_destroy still writes what is buffered.
  static const bool at_exit = std::atexit([] { flush(); }) == 0;
  (void)at_exit;
  // A recording whose last holder is going away but whose deleter has not
  // run yet: finish its file before opening the next.
  stop_current();
  buffer().reserve(kFlushEvents);
  std::shared_ptr<Recording> rec(new Recording(path, rank), [](Recording *r) {
    {
      std::lock_guard<std::mutex> l(g_mu);
      if (g_current == r) stop_current();
    }
    delete r;
  });
  g_current = rec.get();
  g_shared = rec;
  detail::g_on.store(true, std::memory_order_relaxed);
  return rec;
}

void flush() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_current) return;
  g_current->append(buffer());
  buffer().clear();
}

}  // namespace timeline
}  // namespace hb
