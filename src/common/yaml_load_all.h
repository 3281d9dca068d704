// YAML::LoadAll without yaml-cpp 0.7's endless loop. Private to the layers that read YAML
// (policy files, --cluster files); header-only, as those layers share no library.
//
// yaml-cpp 0.7 (Debian bookworm) reads a document that starts with a token no node can start
// with (a stray `,`, as in the text "," or "a: 1\n---\n,") as an empty document without
// consuming the token, so LoadAll appends empty documents until memory runs out (fixed upstream
// after 0.8.0, jbeder/yaml-cpp PR #1319). Found by fuzz/policy_fuzz.cpp and cluster_file_fuzz.cpp.
#pragma once

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace gapless::yaml {

namespace detail {

// Remembers where the current document starts; ignores everything else.
class DocumentStarts final : public YAML::EventHandler {
 public:
  YAML::Mark start;
  void OnDocumentStart(const YAML::Mark& mark) override { start = mark; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

}  // namespace detail

// The documents of `text`, as YAML::LoadAll returns them. Throws what LoadAll throws, and
// YAML::ParserException where LoadAll would loop: a first pass over the events finds a document
// that starts where the previous one did (the parser is stuck on a token), before LoadAll runs.
inline std::vector<YAML::Node> load_all(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  detail::DocumentStarts events;
  std::optional<int> previous;
  while (parser.HandleNextDocument(events)) {
    if (previous == events.start.pos) {
      throw YAML::ParserException(events.start, "unexpected character; a node cannot start here");
    }
    previous = events.start.pos;
  }
  return YAML::LoadAll(text);
}

}  // namespace gapless::yaml
