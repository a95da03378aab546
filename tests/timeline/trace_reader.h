// Reads a timeline file (src/timeline) back with cJSON for the tests: the
// complete events ("ph":"X") and their fields.
#pragma once

#include <cjson/cJSON.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace hb_test {

struct TraceEvent {
  std::string name, category;
  double ts = 0, dur = 0;
  int pid = -1, tid = -1;
  long long bytes = -1;  // args.bytes when present
};

struct Trace {
  bool valid = false;  // the file parsed as a JSON array
  std::string error;
  std::string process_name;  // from the "M" metadata event
  std::vector<TraceEvent> events;

  size_t count(const std::string &name) const {
    size_t n = 0;
    for (const TraceEvent &e : events) n += e.name == name;
    return n;
  }
  const TraceEvent *find(const std::string &name) const {
    for (const TraceEvent &e : events)
      if (e.name == name) return &e;
    return nullptr;
  }
};

inline Trace read_trace(const std::string &path) {
  Trace t;
  std::ifstream in(path);
  if (!in) {
    t.error = "cannot open " + path;
    return t;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  cJSON *root = cJSON_Parse(text.c_str());
  if (!root || !cJSON_IsArray(root)) {
    t.error = "not a JSON array: " + path;
    cJSON_Delete(root);
    return t;
  }
  t.valid = true;
  cJSON *e = nullptr;
  cJSON_ArrayForEach(e, root) {
    const cJSON *ph = cJSON_GetObjectItem(e, "ph");
    const cJSON *name = cJSON_GetObjectItem(e, "name");
    if (!cJSON_IsString(ph) || !cJSON_IsString(name)) {
      t.valid = false;
      t.error = "event without ph or name";
      continue;
    }
    const cJSON *args = cJSON_GetObjectItem(e, "args");
    if (std::string(ph->valuestring) == "M") {
      const cJSON *n = args ? cJSON_GetObjectItem(args, "name") : nullptr;
      if (cJSON_IsString(n)) t.process_name = n->valuestring;
      continue;
    }
    TraceEvent ev;
    ev.name = name->valuestring;
    const cJSON *cat = cJSON_GetObjectItem(e, "cat");
    const cJSON *ts = cJSON_GetObjectItem(e, "ts");
    const cJSON *dur = cJSON_GetObjectItem(e, "dur");
    const cJSON *pid = cJSON_GetObjectItem(e, "pid");
    const cJSON *tid = cJSON_GetObjectItem(e, "tid");
    if (std::string(ph->valuestring) != "X" || !cJSON_IsString(cat) ||
        !cJSON_IsNumber(ts) || !cJSON_IsNumber(dur) || !cJSON_IsNumber(pid) ||
        !cJSON_IsNumber(tid)) {
      t.valid = false;
      t.error = "malformed event " + ev.name;
      continue;
    }
    ev.category = cat->valuestring;
    ev.ts = ts->valuedouble;
    ev.dur = dur->valuedouble;
    ev.pid = pid->valueint;
    ev.tid = tid->valueint;
    const cJSON *bytes = args ? cJSON_GetObjectItem(args, "bytes") : nullptr;
    if (cJSON_IsNumber(bytes))
      ev.bytes = static_cast<long long>(bytes->valuedouble);
    t.events.push_back(ev);
  }
  cJSON_Delete(root);
  return t;
}

}  // namespace hb_test
