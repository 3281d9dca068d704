#include <catch2/catch.hpp>

#include "gapless/k8s/json_fields.h"
#include "gapless/k8s/quantity.h"

using gapless::k8s::parse_whole_quantity;
using gapless::k8s::quantity_value;
using nlohmann::json;

TEST_CASE("parse_whole_quantity accepts plain non-negative integers", "[k8s][quantity]") {
  struct Case {
    const char* text;
    std::int64_t want;
  };
  const Case cases[] = {
      {"0", 0},       {"1", 1},   {"8", 8},
      {"8192", 8192}, {"007", 7}, {"9007199254740992", std::int64_t{1} << 53},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    auto r = parse_whole_quantity(c.text);
    REQUIRE(r.ok());
    CHECK(*r == c.want);
  }
}

TEST_CASE("parse_whole_quantity rejects everything else, quoting the value", "[k8s][quantity]") {
  struct Case {
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      {"", "must be a whole number, got \"\""},
      {"8Gi", "must be a whole number, got \"8Gi\""},
      {"500m", "must be a whole number, got \"500m\""},
      {"1.5", "must be a whole number, got \"1.5\""},
      {"1e3", "must be a whole number, got \"1e3\""},
      {"-1", "must be a whole number, got \"-1\""},
      {"+1", "must be a whole number, got \"+1\""},
      {" 1", "must be a whole number, got \" 1\""},
      {"1 ", "must be a whole number, got \"1 \""},
      {"0x10", "must be a whole number, got \"0x10\""},
      {"9007199254740993", "must be at most 9007199254740992, got \"9007199254740993\""},
      {"99999999999999999999999999", "must be at most 9007199254740992"},
      {"99999999999999999999999999x", "must be a whole number"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    auto r = parse_whole_quantity(c.text);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::Contains(c.message));
  }
}

TEST_CASE("quantity_value takes strings and, from YAML, integers", "[k8s][quantity]") {
  CHECK(*quantity_value(json("4")) == 4);
  CHECK(*quantity_value(json(4)) == 4);
  CHECK(*quantity_value(json(4u)) == 4);
  CHECK(quantity_value(json(-1)).error() == "must be a whole number, got \"-1\"");
  CHECK(quantity_value(json(1.5)).error() == "must be a whole number, got 1.5");
  CHECK(quantity_value(json(true)).error() == "must be a whole number, got true");
  CHECK(quantity_value(json::array()).error() == "must be a whole number, got []");
  CHECK_FALSE(quantity_value(json(std::uint64_t{18446744073709551615u})).ok());
}
