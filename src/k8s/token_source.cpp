#include "token_source.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

namespace gapless::k8s {

std::string trim_whitespace(std::string s) {
  const auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

TokenSource::TokenSource(std::string token, std::string file)
    : token_(trim_whitespace(std::move(token))), file_(std::move(file)) {}

std::string TokenSource::get() {
  std::lock_guard lock(mu_);
  if (!file_.empty() && (!read_ || std::chrono::steady_clock::now() - read_at_ >= max_age)) {
    read_locked();
  }
  return token_;
}

std::string TokenSource::reload() {
  std::lock_guard lock(mu_);
  if (!file_.empty()) read_locked();
  return token_;
}

void TokenSource::read_locked() {
  read_ = true;
  read_at_ = std::chrono::steady_clock::now();
  std::ifstream in(file_, std::ios::binary);
  if (!in) return;  // keep the last good token
  std::stringstream text;
  text << in.rdbuf();
  std::string token = trim_whitespace(text.str());
  if (!token.empty()) token_ = std::move(token);
}

}  // namespace gapless::k8s
