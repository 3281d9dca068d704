#include "gapless/model/name_index.h"

#include <functional>

namespace gapless::model {

std::uint64_t NameIndex::hash_of(std::string_view name) {
  return std::hash<std::string_view>{}(name);
}

void NameIndex::place(Slot s) {
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = s.hash & mask;
  while (slots_[i].node != nullptr) i = (i + 1) & mask;
  slots_[i] = s;
}

void NameIndex::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.empty() ? 16 : old.size() * 2, Slot{});
  for (const Slot& s : old) {
    if (s.node != nullptr) place(s);
  }
}

void NameIndex::insert(const Node* node) {
  if (2 * (size_ + 1) > slots_.size()) grow();
  place(Slot{hash_of(node->name), node});
  ++size_;
}

const Node* NameIndex::find(std::string_view name) const {
  if (slots_.empty()) return nullptr;
  const std::uint64_t h = hash_of(name);
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = h & mask; slots_[i].node != nullptr; i = (i + 1) & mask) {
    if (slots_[i].hash == h && slots_[i].node->name == name) return slots_[i].node;
  }
  return nullptr;
}

void NameIndex::erase(std::string_view name) {
  if (slots_.empty()) return;
  const std::uint64_t h = hash_of(name);
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = h & mask;
  while (slots_[i].node != nullptr && !(slots_[i].hash == h && slots_[i].node->name == name)) {
    i = (i + 1) & mask;
  }
  if (slots_[i].node == nullptr) return;
  // Backward-shift deletion: move later entries of the probe run into the hole when their home
  // slot does not lie (cyclically) between the hole and them, so no lookup ever stops early.
  std::size_t hole = i;
  for (std::size_t j = (hole + 1) & mask; slots_[j].node != nullptr; j = (j + 1) & mask) {
    const std::size_t home = slots_[j].hash & mask;
    const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    slots_[hole] = slots_[j];
    hole = j;
  }
  slots_[hole] = Slot{};
  --size_;
}

void NameIndex::clear() {
  slots_.clear();
  size_ = 0;
}

}  // namespace gapless::model
