#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "abi/error.h"
#include "context/cluster.h"
#include "hb.h"

namespace {

std::string read_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string first_line(const std::string &path) {
  std::string s = read_file(path);
  return s.substr(0, s.find('\n'));
}

std::string summary(const hb::TfConfig &tf) {
  return hb::format("chief=%zu worker=%zu ps=%zu evaluator=%zu task=%s/%d",
                    tf.chief.size(), tf.worker.size(), tf.ps.size(),
                    tf.evaluator.size(), tf.task_type.c_str(), tf.task_index);
}

// Parses; returns the summary, or "ERROR <status>: <message>".
std::string parse(const std::string &json) {
  hb::TfConfig tf;
  hb_status st = hb::guard([&] { tf = hb::parse_tf_config(json); });
  if (st != HB_OK) return hb::format("ERROR %d: %s", st, hb_last_error());
  return summary(tf);
}

std::vector<std::string> corpus_cases() {
  std::vector<std::string> names;
  DIR *d = opendir(HB_TF_CONFIG_CORPUS);
  if (!d) return names;
  while (dirent *e = readdir(d)) {
    std::string n = e->d_name;
    if (n.size() > 5 && n.compare(n.size() - 5, 5, ".json") == 0)
      names.push_back(n.substr(0, n.size() - 5));
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

TEST(TfConfig, Corpus) {
  std::vector<std::string> cases = corpus_cases();
  ASSERT_GE(cases.size(), 60u) << "corpus not found at " HB_TF_CONFIG_CORPUS;
  for (const std::string &name : cases) {
    std::string base = std::string(HB_TF_CONFIG_CORPUS) + "/" + name;
    std::string expect = first_line(base + ".expect");
    ASSERT_FALSE(expect.empty()) << name << ".expect is missing or empty";
    std::string got = parse(read_file(base + ".json"));
    if (name.rfind("bad_", 0) == 0) {
      EXPECT_EQ(got.rfind(hb::format("ERROR %d: ", HB_ERR_CONFIG), 0), 0u)
          << name << ": " << got;
      EXPECT_NE(got.find(expect), std::string::npos)
          << name << "\n  got:      " << got << "\n  expected: " << expect;
    } else {
      EXPECT_EQ(got, expect) << name;
    }
  }
}

TEST(TfConfig, ParsedFields) {
  hb::TfConfig tf = hb::parse_tf_config(
      R"({"cluster":{"chief":["c:1"],"worker":["w0:1","w1:1"],"ps":["p:1"]},)"
      R"("task":{"type":"worker","index":1}})");
  EXPECT_EQ(tf.chief, std::vector<std::string>({"c:1"}));
  EXPECT_EQ(tf.worker, std::vector<std::string>({"w0:1", "w1:1"}));
  EXPECT_EQ(tf.ps, std::vector<std::string>({"p:1"}));
  EXPECT_TRUE(tf.evaluator.empty());
  EXPECT_EQ(tf.task_type, "worker");
  EXPECT_EQ(tf.task_index, 1);
}

TEST(TfConfig, HostileSizesAreCapped) {
  std::string big =
      R"({"cluster":{"worker":["h:1"]},"task":{"type":"worker"},"pad":")" +
      std::string(2 << 20, 'x') + "\"}";
  EXPECT_NE(parse(big).find("TF_CONFIG is 2097" /* bytes */), std::string::npos)
      << parse(big).substr(0, 200);
  EXPECT_NE(parse(big).find("the limit is 1048576"), std::string::npos);

  std::string many = R"({"cluster":{"worker":[)";
  for (int i = 0; i < 70000; ++i)
    many += (i ? ",\"h" : "\"h") + std::to_string(i % 1000) + ":" +
            std::to_string(1 + i / 1000) + "\"";
  many += R"(]},"task":{"type":"worker","index":0}})";
  ASSERT_LT(many.size(), 1u << 20);
  EXPECT_NE(parse(many).find("more than 65536 tasks in \"cluster\" (at "
                             "cluster.worker[65536])"),
            std::string::npos)
      << parse(many).substr(0, 300);

  std::string long_type = R"({"cluster":{"worker":["h:1"]},"task":{"type":")" +
                          std::string(100000, 'w') + "\"}}";
  std::string got = parse(long_type);
  EXPECT_NE(got.find("(100000 bytes) is not a role"), std::string::npos)
      << got.substr(0, 300);
  EXPECT_LT(got.size(), 400u) << "a hostile value was echoed whole";
}

// hb_tf_config_build into a std::string, checking the sizing protocol.
std::string build(const char *type, int id, std::vector<const char *> workers,
                  std::vector<const char *> ps, int has_evaluator,
                  hb_status *status = nullptr) {
  size_t needed = 0;
  hb_status st =
      hb_tf_config_build(type, id, workers.data(), workers.size(), ps.data(),
                         ps.size(), has_evaluator, nullptr, 0, &needed);
  if (status) *status = st;
  if (st == HB_OK) ADD_FAILURE() << "a zero-capacity buffer was accepted";
  if (needed == 0) return "";
  std::string buf(needed, '\0');
  st = hb_tf_config_build(type, id, workers.data(), workers.size(), ps.data(),
                          ps.size(), has_evaluator, &buf[0], buf.size(),
                          &needed);
  if (status) *status = st;
  EXPECT_EQ(st, HB_OK) << hb_last_error();
  EXPECT_EQ(buf.size(), needed);
  buf.resize(needed - 1);
  return buf;
}

TEST(TfConfigBuild, RoundTripsThroughTheParser) {
  std::string json = build("worker", 1, {"w0:2222", "w1:2222", "w2:2222"},
                           {"p0:2222", "p1:2222"}, 0);
  EXPECT_EQ(
      json,
      R"({"cluster":{"chief":["w0:2222"],"worker":["w1:2222","w2:2222"],)"
      R"("ps":["p0:2222","p1:2222"]},"task":{"type":"worker","index":1}})");
  hb::TfConfig tf = hb::parse_tf_config(json);
  EXPECT_EQ(tf.chief, std::vector<std::string>({"w0:2222"}));
  EXPECT_EQ(tf.worker, std::vector<std::string>({"w1:2222", "w2:2222"}));
  EXPECT_EQ(tf.ps, std::vector<std::string>({"p0:2222", "p1:2222"}));
  EXPECT_EQ(tf.task_type, "worker");
  EXPECT_EQ(tf.task_index, 1);

  EXPECT_EQ(parse(build("chief", 0, {"[::1]:5"}, {}, 0)),
            "chief=1 worker=0 ps=0 evaluator=0 task=chief/0");
  EXPECT_EQ(parse(build("ps", 1, {"a:1", "b:1"}, {"c:1", "d:1"}, 0)),
            "chief=1 worker=1 ps=2 evaluator=0 task=ps/1");
  std::string eval = build("evaluator", 0, {"a:1", "b:1"}, {}, 1);
  EXPECT_EQ(eval.find("evaluator\"]"), std::string::npos)
      << "evaluators are not listed in the cluster: " << eval;
  EXPECT_EQ(parse(eval), "chief=1 worker=1 ps=0 evaluator=0 task=evaluator/0");
}

TEST(TfConfigBuild, RejectsBadArguments) {
  const char *w[] = {"a:1", "b:1"};
  const char *dup[] = {"a:1", "a:1"};
  const char *bad[] = {"a:1", "nohost"};
  const char *with_null[] = {"a:1", nullptr};
  const char *with_empty[] = {"a:1", ""};
  char buf[512];
  struct Case {
    const char *type;
    int id;
    const char *const *workers;
    size_t nw;
    int eval;
    const char *expect;
  } cases[] = {
      {nullptr, 0, w, 2, 0, "task_type is NULL"},
      {"master", 0, w, 2, 0,
       "task_type 'master' is not chief, worker, ps or evaluator"},
      {"chief", 1, w, 2, 0, "task_id 1 out of range for chief (1 task)"},
      {"worker", 1, w, 2, 0, "task_id 1 out of range for worker (1 task)"},
      {"worker", -1, w, 2, 0, "task_id -1 out of range"},
      {"ps", 0, w, 2, 0, "task_id 0 out of range for ps (0 tasks)"},
      {"evaluator", 0, w, 2, 0, "has_evaluator is 0"},
      {"chief", 0, w, 0, 0, "no worker_hosts"},
      {"chief", 0, nullptr, 2, 0, "worker_hosts is NULL but n is 2"},
      {"chief", 0, with_null, 2, 0, "worker_hosts[1] is NULL"},
      {"chief", 0, with_empty, 2, 0, "worker_hosts[1] is empty"},
      {"chief", 0, dup, 2, 0,
       "cluster.worker[0] 'a:1' duplicates cluster.chief[0]"},
      {"chief", 0, bad, 2, 0, "cluster.worker[0]='nohost': expected host:port"},
  };
  for (const Case &c : cases) {
    std::memset(buf, 'x', sizeof buf);
    size_t needed = 0;
    EXPECT_EQ(hb_tf_config_build(c.type, c.id, c.workers, c.nw, nullptr, 0,
                                 c.eval, buf, sizeof buf, &needed),
              HB_ERR_INVALID_ARGUMENT)
        << c.expect;
    EXPECT_NE(std::string(hb_last_error()).find(c.expect), std::string::npos)
        << hb_last_error() << "\n  expected: " << c.expect;
    EXPECT_EQ(buf[0], 'x') << "buf was written on failure";
  }
  // Too small: *needed is still reported and buf untouched.
  size_t needed = 0;
  std::memset(buf, 'x', sizeof buf);
  EXPECT_EQ(
      hb_tf_config_build("chief", 0, w, 2, nullptr, 0, 0, buf, 10, &needed),
      HB_ERR_INVALID_ARGUMENT);
  EXPECT_GT(needed, 10u);
  EXPECT_EQ(buf[0], 'x');
  EXPECT_NE(std::string(hb_last_error()).find("buf has 10 bytes"),
            std::string::npos);
  EXPECT_EQ(
      hb_tf_config_build("chief", 0, w, 2, nullptr, 0, 0, nullptr, 5, &needed),
      HB_ERR_INVALID_ARGUMENT);
  // Exactly the needed size works; needed may be NULL.
  size_t exact = needed;
  EXPECT_EQ(
      hb_tf_config_build("chief", 0, w, 2, nullptr, 0, 0, buf, exact, nullptr),
      HB_OK);
  EXPECT_EQ(std::strlen(buf) + 1, exact);
}

}  // namespace
