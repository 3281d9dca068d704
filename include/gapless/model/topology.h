// The link graph between the GPUs of one node (Boost.Graph adjacency matrix: nodes hold at most
// a few dozen GPUs, and placement asks "how are i and j connected?" far more than it walks edges).
#pragma once

#include <boost/graph/adjacency_matrix.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gapless::model {

// PCIe path words follow `nvidia-smi topo -m`, best first.
enum class PciePath { kPIX, kPXB, kPHB, kNODE, kSYS };

// Parses "PIX", "PXB", "PHB", "NODE", "SYS" (case-sensitive, as nvidia-smi prints them).
bool parse_pcie_path(std::string_view word, PciePath* out);
std::string_view to_string(PciePath path);

struct Link {
  enum class Kind { kPCIe, kNVLink };
  Kind kind = Kind::kPCIe;
  int nvlink_count = 0;             // NVLink lanes between the pair (NVSwitch boxes report 18 on H100)
  PciePath path = PciePath::kSYS;   // for PCIe links
  bool degraded = false;            // a degraded NVLink counts as PCIe

  bool is_nvlink() const { return kind == Kind::kNVLink && !degraded && nvlink_count > 0; }
  // Pair weight on go-gpuallocator's scale, so GPU sets compare the way NVIDIA's device plugin
  // scores them: 100 per NVLink lane (capped at kMaxWeight), PCIe PIX 50, PXB 40, PHB 30,
  // NODE 20, SYS 10. A degraded NVLink counts as SYS.
  int weight() const;
  static constexpr int kMaxWeight = 1200;  // 12 lanes: A100 NVSwitch; H100's 18 lanes cap here
};

// Undirected link graph: vertex i is the GPU with index i. A pair that was never set is PCIe SYS.
// Placement asks the same questions for thousands of nodes per pod, so the graph also keeps
// flat caches (NVLink neighbour bitmasks, pair weights), updated by set().
// Nodes have at most kMaxGpus GPUs.
class LinkGraph {
 public:
  static constexpr int kMaxGpus = 64;

  LinkGraph() : LinkGraph(0) {}
  // REQUIRES: 0 <= gpu_count <= kMaxGpus
  explicit LinkGraph(int gpu_count);

  int size() const { return static_cast<int>(boost::num_vertices(g_)); }
  // REQUIRES: 0 <= a, b < size(), a != b. Replaces any earlier link of the pair.
  void set(int a, int b, const Link& link);
  // The link between a and b (PCIe SYS when none was set). REQUIRES: indices in range.
  Link get(int a, int b) const;
  // Number of NVLink neighbours of a.
  int nvlink_degree(int a) const;
  // Bit j set: a and j are NVLink-connected (not degraded).
  std::uint64_t nvlink_mask(int a) const { return nvlink_masks_[a]; }
  // Link::weight() of the pair; 0 for a == b.
  int weight(int a, int b) const { return weights_[a * size() + b]; }

 private:
  using Graph = boost::adjacency_matrix<boost::undirectedS, boost::no_property, Link>;
  Graph g_;
  std::vector<std::uint64_t> nvlink_masks_;
  std::vector<std::uint16_t> weights_;  // size() x size()
};

}  // namespace gapless::model
