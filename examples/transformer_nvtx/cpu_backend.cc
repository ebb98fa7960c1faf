#include "examples/transformer_nvtx/cpu_backend.h"

#include <algorithm>
#include <cmath>

namespace transformer_nvtx {
namespace {

// Bounds the scratch buffers for gathers and optimizer updates, which touch memory rather than
// compute; a few hundred KB is enough to take visible time without slowing the loop down.
constexpr int64_t kMaxStreamElements = int64_t{1} << 16;

}  // namespace

CpuBackend::CpuBackend(int64_t max_multiply_adds)
    : max_multiply_adds_(std::max<int64_t>(1, max_multiply_adds)) {}

CpuBackend::Shape CpuBackend::Scaled(int64_t m, int64_t n, int64_t k) const {
  m = std::max<int64_t>(1, m);
  n = std::max<int64_t>(1, n);
  k = std::max<int64_t>(1, k);
  const double work = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  if (work <= static_cast<double>(max_multiply_adds_)) return {m, n, k};
  double factor = std::cbrt(work / static_cast<double>(max_multiply_adds_));
  Shape shape{};
  // Dimensions that would drop below 1 are held at 1, which can leave the product too big, so
  // grow the factor until it fits.
  do {
    shape = {std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(m) / factor)),
             std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(n) / factor)),
             std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(k) / factor))};
    factor *= 1.25;
  } while (shape.m * shape.n * shape.k > max_multiply_adds_);
  return shape;
}

float* CpuBackend::Scratch(std::vector<float>& buffer, int64_t elements) {
  if (static_cast<int64_t>(buffer.size()) < elements) {
    buffer.resize(static_cast<size_t>(elements), 0.5f);
  }
  return buffer.data();
}

void CpuBackend::Gemm(Precision, int64_t m, int64_t n, int64_t k) {
  const Shape s = Scaled(m, n, k);
  const float* a = Scratch(a_, s.m * s.k);
  const float* b = Scratch(b_, s.k * s.n);
  float* c = Scratch(c_, s.m * s.n);
  for (int64_t row = 0; row < s.m; ++row) {
    for (int64_t col = 0; col < s.n; ++col) {
      float sum = 0;
      for (int64_t i = 0; i < s.k; ++i) sum += a[row * s.k + i] * b[i * s.n + col];
      c[row * s.n + col] = sum;
    }
  }
  multiply_adds_ += s.m * s.n * s.k;
  sink_ = c[0];
}

void CpuBackend::Gather(int64_t rows, int64_t width) {
  const int64_t elements = std::min(std::max<int64_t>(1, rows * width), kMaxStreamElements);
  const float* table = Scratch(a_, elements);
  float* out = Scratch(c_, elements);
  std::copy(table, table + elements, out);
  sink_ = out[elements - 1];
}

void CpuBackend::Axpy(int64_t count) {
  const int64_t elements = std::min(std::max<int64_t>(1, count), kMaxStreamElements);
  const float* x = Scratch(a_, elements);
  float* y = Scratch(c_, elements);
  for (int64_t i = 0; i < elements; ++i) y[i] += 1e-3f * x[i];
  sink_ = y[0];
}

}  // namespace transformer_nvtx
