// The limit's linear program (lp_bound.h), built column by column and solved with CLP.
#include "lp_bound.h"

#include <ClpSimplex.hpp>
#include <CoinPackedMatrix.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <numeric>
#include <set>

namespace gapless::bench {
namespace {

constexpr double kInf = 1e30;

// The program in CLP's terms: columns with bounds and objective, rows with bounds, entries.
struct Program {
  std::vector<double> col_lo, col_hi, objective, row_lo, row_hi;
  std::vector<int> entry_row, entry_col;
  std::vector<double> entry_value;

  int column(double lo, double hi, double obj) {
    col_lo.push_back(lo), col_hi.push_back(hi), objective.push_back(obj);
    return static_cast<int>(col_lo.size()) - 1;
  }
  int row(double lo, double hi) {
    row_lo.push_back(lo), row_hi.push_back(hi);
    return static_cast<int>(row_lo.size()) - 1;
  }
  void entry(int r, int c, double v) {
    entry_row.push_back(r), entry_col.push_back(c), entry_value.push_back(v);
  }
};

// The common step of all share sizes and a whole GPU, so that every packing lands on a position.
int position_step(const std::vector<PodShape>& shapes) {
  int step = 1000;
  for (const PodShape& s : shapes)
    if (s.share_milli > 0) step = std::gcd(step, s.share_milli);
  return step;
}

// One arc of the flow: a share of `size` steps starting at `from`, or (size 0) the rest of the
// GPU left empty, from `from` to the end.
struct Arc {
  int from = 0, size = 0;
};

// The arcs of one GPU's flow for these share sizes (in steps, any order). A packing is a path
// from 0 to the end; putting its shares in decreasing size order loses no packing, so a share
// arc starts only where shares at least as large can lead.
std::vector<Arc> gpu_arcs(std::vector<int> sizes, int end) {
  std::sort(sizes.rbegin(), sizes.rend());
  std::vector<bool> reached(end + 1, false);
  reached[0] = true;
  std::vector<Arc> arcs;
  for (int size : sizes) {
    for (int p = 0; p + size <= end; ++p) {
      if (!reached[p]) continue;
      reached[p + size] = true;
      arcs.push_back({p, size});
    }
  }
  for (int p = 1; p < end; ++p)
    if (reached[p]) arcs.push_back({p, 0});
  return arcs;
}

// Per type: x columns for the shapes allowed on it, its CPU, memory and GPU rows, and the
// shares' arc flow. `placed[s]` gets the x column of shape s on this type (-1: not allowed).
void add_type(const LimitInstance& in, std::size_t t, const std::vector<int>& shape_rows, int step,
              Program* lp, std::vector<int>* placed) {
  const NodeType& type = in.types[t];
  const double n = type.count;
  const int cpu = lp->row(-kInf, n * static_cast<double>(type.cpu_milli));
  const int mem = lp->row(-kInf, n * static_cast<double>(type.memory_mib));
  const int gpus = lp->row(-kInf, n * type.gpus);
  std::map<int, std::vector<int>> share_columns;  // size in steps -> x columns of that size
  for (std::size_t s = 0; s < in.shapes.size(); ++s) {
    const PodShape& shape = in.shapes[s];
    (*placed)[s] = -1;
    if (!shape.allowed_on(type)) continue;
    const int x = lp->column(0, shape.count, static_cast<double>(shape.value()));
    (*placed)[s] = x;
    lp->entry(shape_rows[s], x, 1);
    lp->entry(cpu, x, static_cast<double>(shape.cpu_milli));
    lp->entry(mem, x, static_cast<double>(shape.memory_mib));
    if (shape.whole > 0) lp->entry(gpus, x, shape.whole);
    if (shape.share_milli > 0) share_columns[shape.share_milli / step].push_back(x);
  }
  if (share_columns.empty()) return;
  // GPUs that hold shares: the flow out of position 0.
  const int end = 1000 / step;
  const int shared_gpus = lp->column(0, n * type.gpus, 0);
  lp->entry(gpus, shared_gpus, 1);
  std::vector<int> balance(end, -1);  // flow in - out = 0 at positions 0..end-1
  balance[0] = lp->row(0, 0);
  lp->entry(balance[0], shared_gpus, 1);
  std::map<int, int> size_row;  // arcs of a size = pods of that size on this type
  for (const auto& [size, xs] : share_columns) {
    size_row[size] = lp->row(0, 0);
    for (int x : xs) lp->entry(size_row[size], x, -1);
  }
  std::vector<int> sizes;
  for (const auto& kv : share_columns) sizes.push_back(kv.first);
  for (const Arc& a : gpu_arcs(sizes, end)) {
    const int f = lp->column(0, kInf, 0);
    if (balance[a.from] < 0) balance[a.from] = lp->row(0, 0);
    lp->entry(balance[a.from], f, -1);
    if (a.size == 0) continue;  // the rest of the GPU empty: flows to the end
    const int to = a.from + a.size;
    if (to < end) {
      if (balance[to] < 0) balance[to] = lp->row(0, 0);
      lp->entry(balance[to], f, 1);
    }
    lp->entry(size_row[a.size], f, 1);
  }
}

LpBound solve(const Program& lp, const std::vector<int>& placed_columns) {
  LpBound out;
  out.columns = static_cast<int>(lp.col_lo.size());
  out.rows = static_cast<int>(lp.row_lo.size());
  CoinPackedMatrix matrix(true, lp.entry_row.data(), lp.entry_col.data(), lp.entry_value.data(),
                          static_cast<CoinBigIndex>(lp.entry_value.size()));
  matrix.setDimensions(out.rows, out.columns);
  ClpSimplex model;
  model.setLogLevel(0);
  model.loadProblem(matrix, lp.col_lo.data(), lp.col_hi.data(), lp.objective.data(),
                    lp.row_lo.data(), lp.row_hi.data());
  model.setOptimizationDirection(-1);  // maximize
  model.dual();
  if (model.status() != 0) {
    out.error = "LP solver status " + std::to_string(model.status());
    return out;
  }
  out.allocated_milli = model.objectiveValue();
  const double* x = model.primalColumnSolution();
  out.placed.assign(placed_columns.size(), 0);
  for (std::size_t i = 0; i < placed_columns.size(); ++i)
    if (placed_columns[i] >= 0) out.placed[i] = x[placed_columns[i]];
  return out;
}

}  // namespace

LpBound solve_lp_bound(const LimitInstance& in) {
  const auto start = std::chrono::steady_clock::now();
  Program lp;
  std::vector<int> shape_rows;
  for (const PodShape& s : in.shapes) shape_rows.push_back(lp.row(-kInf, s.count));
  const int step = position_step(in.shapes);
  const std::size_t T = in.types.size();
  std::vector<int> placed_columns(in.shapes.size() * T, -1);
  std::vector<int> per_type(in.shapes.size());
  for (std::size_t t = 0; t < T; ++t) {
    add_type(in, t, shape_rows, step, &lp, &per_type);
    for (std::size_t s = 0; s < in.shapes.size(); ++s) placed_columns[s * T + t] = per_type[s];
  }
  LpBound out;
  if (lp.col_lo.empty()) {
    out.placed.assign(placed_columns.size(), 0);  // nothing can be placed: the bound is 0
  } else {
    out = solve(lp, placed_columns);
  }
  // A failed solve bounds nothing below: every GPU allocated.
  if (!out.error.empty()) out.allocated_milli = static_cast<double>(in.capacity_milli);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace gapless::bench
