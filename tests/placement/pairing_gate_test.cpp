// The bind gate (placement/pairing_gate.h): which binds wait for which open pods, in what order
// they go, and how open pods close.
#include <catch2/catch.hpp>

#include "gapless/placement/pairing_gate.h"

using namespace gapless::placement;

namespace {

const DeviceClasses kOneGpu = {{"nvidia.com/gpu", 1}};
const DeviceClasses kTwoGpus = {{"nvidia.com/gpu", 2}};
const DeviceClasses kOneShare = {{"gapless.io/gpu-shared-count", 1}};

std::vector<std::string> uids(const std::vector<PairingGate::Released>& released) {
  std::vector<std::string> out;
  for (const auto& r : released) out.push_back(r.uid);
  return out;
}

}  // namespace

TEST_CASE("class sets conflict when they share a (resource, count)", "[pairing]") {
  CHECK(classes_conflict(kOneGpu, kOneGpu));
  CHECK_FALSE(classes_conflict(kOneGpu, kTwoGpus));
  CHECK_FALSE(classes_conflict(kOneGpu, kOneShare));
  CHECK(classes_conflict({{"nvidia.com/gpu", 1}, {"nvidia.com/gpu", 2}}, kTwoGpus));
  CHECK_FALSE(classes_conflict({}, kOneGpu));
}

TEST_CASE("a conflicting bind on the same node waits; others go", "[pairing]") {
  PairingGate gate;
  REQUIRE(gate.try_open("n1", "a", "ml/a", kOneGpu, 0).open);
  const auto b = gate.try_open("n1", "b", "ml/b", kOneGpu, 1);
  CHECK_FALSE(b.open);
  CHECK(b.blocker == "ml/a");
  CHECK(b.blocker_uid == "a");
  CHECK(gate.blocker_of(b.ticket) == "ml/a");
  // Another size, another resource, another node, no plugin resource at all: never held.
  CHECK(gate.try_open("n1", "c", "ml/c", kTwoGpus, 1).open);
  CHECK(gate.try_open("n1", "d", "ml/d", kOneShare, 1).open);
  CHECK(gate.try_open("n2", "e", "ml/e", kOneGpu, 1).open);
  CHECK(gate.try_open("n1", "f", "ml/f", {}, 1).open);
  CHECK_FALSE(gate.is_open("f"));  // nothing to hold for it
  // A retried bind of an open pod goes.
  CHECK(gate.try_open("n1", "a", "ml/a", kOneGpu, 2).open);
  CHECK(gate.open_count() == 4);
  CHECK(gate.waiting_count() == 1);
}

TEST_CASE("waiting binds go in FIFO order, one per class at a time", "[pairing]") {
  PairingGate gate;
  REQUIRE(gate.try_open("n1", "a", "ml/a", kOneGpu, 0).open);
  const auto b = gate.try_open("n1", "b", "ml/b", kOneGpu, 1);
  const auto c = gate.try_open("n1", "c", "ml/c", kOneGpu, 2);
  // Conflicts with the waiting "b" (both 1 GPU... and 2 GPUs): waits behind it, not overtaking.
  const auto d =
      gate.try_open("n1", "d", "ml/d", {{"nvidia.com/gpu", 1}, {"nvidia.com/gpu", 2}}, 3);
  REQUIRE_FALSE(b.open);
  REQUIRE_FALSE(c.open);
  REQUIRE_FALSE(d.open);
  CHECK(d.blocker == "ml/a");
  // A 2-GPU pod meets only the waiting "d": it waits too (first come, first served).
  const auto e = gate.try_open("n1", "e", "ml/e", kTwoGpus, 4);
  CHECK_FALSE(e.open);

  auto released = gate.close("a", CloseReason::kAllocated, 10);
  REQUIRE(uids(released) == std::vector<std::string>{"b"});
  CHECK(released[0].ticket == b.ticket);
  CHECK(released[0].waiting_since == 1);
  CHECK(gate.is_open("b"));
  CHECK(uids(gate.close("b", CloseReason::kStarted, 11)) == std::vector<std::string>{"c"});
  CHECK(uids(gate.close("c", CloseReason::kDeleted, 12)) == std::vector<std::string>{"d"});
  CHECK(uids(gate.close("d", CloseReason::kAllocated, 13)) == std::vector<std::string>{"e"});
  CHECK(gate.waiting_count() == 0);
  CHECK(gate.close("nobody", CloseReason::kAllocated, 14).empty());
}

TEST_CASE("closing releases every waiter nothing else holds", "[pairing]") {
  PairingGate gate;
  REQUIRE(gate.try_open("n1", "a", "ml/a", {{"nvidia.com/gpu", 1}, {"nvidia.com/gpu", 2}}, 0).open);
  REQUIRE_FALSE(gate.try_open("n1", "b", "ml/b", kOneGpu, 1).open);
  REQUIRE_FALSE(gate.try_open("n1", "c", "ml/c", kTwoGpus, 2).open);
  REQUIRE(gate.try_open("n2", "x", "ml/x", kOneGpu, 0).open);
  CHECK(uids(gate.close("a", CloseReason::kAllocated, 5)) == std::vector<std::string>{"b", "c"});
  CHECK(gate.open_count() == 3);
}

TEST_CASE("a bind that gives up lets the ones behind it go", "[pairing]") {
  PairingGate gate;
  REQUIRE(gate.try_open("n1", "a", "ml/a", kOneGpu, 0).open);
  const auto b =
      gate.try_open("n1", "b", "ml/b", {{"nvidia.com/gpu", 1}, {"nvidia.com/gpu", 2}}, 1);
  const auto c = gate.try_open("n1", "c", "ml/c", kTwoGpus, 2);  // behind b
  REQUIRE_FALSE(c.open);
  CHECK(uids(gate.cancel(b.ticket, 3)) == std::vector<std::string>{"c"});
  CHECK_FALSE(gate.is_open("b"));
  CHECK(gate.cancel(b.ticket, 4).empty());  // gone already
}

TEST_CASE("open pods expire after the timeout and release their waiters", "[pairing]") {
  PairingGate gate;
  REQUIRE(gate.try_open("n1", "a", "ml/a", kOneGpu, 0).open);
  REQUIRE(gate.try_open("n2", "z", "ml/z", kOneGpu, 50).open);
  REQUIRE_FALSE(gate.try_open("n1", "b", "ml/b", kOneGpu, 30).open);
  CHECK(gate.oldest_open() == 0);
  CHECK(gate.expire(59, 60).expired.empty());
  const auto e = gate.expire(60, 60);
  REQUIRE(e.expired.size() == 1);
  CHECK(e.expired[0].uid == "a");
  CHECK(e.expired[0].name == "ml/a");
  CHECK(e.expired[0].node == "n1");
  CHECK(uids(e.released) == std::vector<std::string>{"b"});
  CHECK(gate.oldest_open() == 50);  // "z"; "b" opened at 60
  CHECK(gate.is_open("b"));
}

TEST_CASE("pods found bound on the watch hold their classes", "[pairing]") {
  PairingGate gate;
  gate.note_bound("n1", "a", "ml/a", kOneGpu, 0);
  gate.note_bound("n1", "a2", "ml/a2", kOneGpu, 0);  // bound by someone else: accounted too
  const auto b = gate.try_open("n1", "b", "ml/b", kOneGpu, 1);
  CHECK_FALSE(b.open);
  CHECK(gate.close("a", CloseReason::kAllocated, 2).empty());  // a2 still holds the class
  CHECK(uids(gate.close("a2", CloseReason::kBindFailed, 3)) == std::vector<std::string>{"b"});
  CHECK(std::string(close_reason_name(CloseReason::kExpired)) == "expired");
}
