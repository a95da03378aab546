#include <poll.h>
#include <thread>
#include "common/clock.h"
#include "rdv_test_util.h"
using namespace hb;
using namespace hb::rdv;
using namespace hb::rdv::test;
TEST(Smoke, Basic) {
  auto server = Server::start(server_config(2));
  auto a = join(server->port(), 0, 2);
  auto b = join(server->port(), 1, 2);
  a->client->set("x", "hello");
  EXPECT_EQ(b->client->get("x", 1000), "hello");
  EXPECT_EQ(a->client->add("c", 5), 5);
  EXPECT_EQ(b->client->add("c", -2), 3);
  std::thread t([&] { a->client->barrier("b", 2000); });
  b->client->barrier("b", 2000);
  t.join();
  std::string m =
      error_of([&] { a->client->get("missing", 200); }, HB_ERR_TIMEOUT);
  EXPECT_NE(m.find("'missing'"), std::string::npos) << m;
  b->client->close();
  a->client->close();
  EXPECT_TRUE(a->health.ok());
  EXPECT_TRUE(b->health.ok());
}
