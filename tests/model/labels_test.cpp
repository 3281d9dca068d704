// Label selectors match as Kubernetes' do (apimachinery labels.Selector from a
// metav1.LabelSelector): everything ANDed, NotIn / DoesNotExist true for a missing key, and the
// empty selector matching every object.
#include <catch2/catch.hpp>

#include "gapless/model/labels.h"

using gapless::model::LabelRequirement;
using gapless::model::Labels;
using gapless::model::LabelSelector;
using Op = LabelRequirement::Op;

TEST_CASE("label selectors match with Kubernetes' rules", "[model][labels]") {
  const Labels prod_a = {{"team", "a"}, {"env", "prod"}};
  const Labels dev_b = {{"team", "b"}, {"env", "dev"}};
  const Labels none = {};
  struct Case {
    const char* what;
    LabelSelector selector;
    bool prod_a, dev_b, none;
  };
  const Case cases[] = {
      {"empty selects everything", {}, true, true, true},
      {"matchLabels", {{{"team", "a"}}, {}}, true, false, false},
      {"matchLabels: every pair", {{{"team", "a"}, {"env", "dev"}}, {}}, false, false, false},
      {"In", {{}, {{"env", Op::kIn, {"prod", "staging"}}}}, true, false, false},
      {"NotIn: a missing key passes", {{}, {{"env", Op::kNotIn, {"prod"}}}}, false, true, true},
      {"Exists", {{}, {{"team", Op::kExists, {}}}}, true, true, false},
      {"DoesNotExist", {{}, {{"team", Op::kDoesNotExist, {}}}}, false, false, true},
      {"labels and expressions ANDed",
       {{{"team", "b"}}, {{"env", Op::kIn, {"dev"}}, {"gpu", Op::kDoesNotExist, {}}}},
       false,
       true,
       false},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    CHECK(c.selector.matches(prod_a) == c.prod_a);
    CHECK(c.selector.matches(dev_b) == c.dev_b);
    CHECK(c.selector.matches(none) == c.none);
  }
}
