// Issue 28 "a bind to a node that was not among the pod's filtered nodes is accepted": the rule
// is that the pod fits on the named node now (docs/front-door.md, "The bind rule"). A node that
// filter never saw and where the pod does not fit is refused; one where it fits is bound, as the
// model at bind time is the authority.
#include <catch2/catch.hpp>
#include <string>

#include "test_server.h"

namespace gapless::test {

TEST_CASE("bind takes a node only where the pod fits now, filtered or not", "[server][bind]") {
  TestServer srv(
      cluster_of(json::array({gfd_node("big-a", 8), gfd_node("small", 1), gfd_node("big-b", 8)})));
  const json pod = gpu_pod("p", "uid-p", 4);
  const json f = srv.call("/filter", extender_args(pod, {"big-a"}));
  REQUIRE(f.at("NodeNames") == json::array({"big-a"}));

  const json refused = srv.call("/bind", bind_args("p", "uid-p", "small"));
  CHECK_FALSE(refused.at("Error").get<std::string>().empty());
  CHECK(srv.binder().bindings().empty());

  const json bound = srv.call("/bind", bind_args("p", "uid-p", "big-b"));
  CHECK(bound.at("Error") == "");
  CHECK(srv.binder().bindings().size() == 1);
}

}  // namespace gapless::test
