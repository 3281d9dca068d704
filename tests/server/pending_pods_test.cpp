// The table of filtered-but-unbound pods stays bounded in count, bytes and age, oldest out first.
#include "gapless/server/pending_pods.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>

namespace gapless::test {
namespace {

k8s::ParsedPod pending(const std::string& uid, std::size_t label_bytes = 0) {
  k8s::ParsedPod p;
  p.info.ns = "default";
  p.info.name = "pod-" + uid;
  p.info.uid = uid;
  if (label_bytes > 0) p.info.labels["big"] = std::string(label_bytes, 'x');
  return p;
}

}  // namespace

TEST_CASE("pending pods: a byte budget evicts the oldest, whatever the count",
          "[server][pending]") {
  constexpr std::size_t kMiB = 1024 * 1024;
  server::PendingPods pods(10000, std::chrono::minutes(30), 32 * kMiB);
  // The case: many filters of pods with a 10 MB label each.
  for (int i = 0; i < 60; ++i) pods.remember(pending("uid-" + std::to_string(i), 10 * kMiB));
  CHECK(pods.bytes() <= 32 * kMiB);
  CHECK(pods.size() == 3);
  CHECK(pods.find("uid-59"));
  CHECK(pods.find("uid-57"));
  CHECK_FALSE(pods.find("uid-56"));
  CHECK_FALSE(pods.find("uid-0"));

  // Small pods still fit beside them; forgetting returns the bytes.
  pods.remember(pending("small"));
  CHECK(pods.find("small"));
  const std::size_t before = pods.bytes();
  pods.forget("uid-59");
  CHECK(pods.bytes() < before - 10 * kMiB);

  // A pod larger than the whole budget is not kept, and evicts nothing newer than itself.
  pods.remember(pending("huge", 40 * kMiB));
  CHECK_FALSE(pods.find("huge"));
  CHECK(pods.bytes() <= 32 * kMiB);
}

TEST_CASE("pending pods: count bound, re-remembering refreshes, bytes add up",
          "[server][pending]") {
  server::PendingPods pods(3);
  for (const char* uid : {"a", "b", "c"}) pods.remember(pending(uid));
  pods.remember(pending("a"));  // now the newest
  pods.remember(pending("d"));  // evicts b, the oldest
  CHECK(pods.size() == 3);
  CHECK(pods.find("a"));
  CHECK_FALSE(pods.find("b"));
  CHECK(pods.bytes() == 3 * server::PendingPods::estimated_bytes(pending("a")));
  for (const char* uid : {"a", "c", "d"}) pods.forget(uid);
  CHECK(pods.size() == 0);
  CHECK(pods.bytes() == 0);
  CHECK(server::PendingPods::estimated_bytes(pending("x", 1000)) >
        server::PendingPods::estimated_bytes(pending("x")) + 1000);
}

TEST_CASE("pending pods: entries older than max_age are gone", "[server][pending]") {
  server::PendingPods pods(10, std::chrono::milliseconds(1));
  pods.remember(pending("old"));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK_FALSE(pods.find("old"));
  pods.remember(pending("new"));  // evicts the expired one
  CHECK(pods.size() == 1);
}

}  // namespace gapless::test
