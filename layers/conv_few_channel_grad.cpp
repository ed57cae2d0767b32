// The few-channel convolution weight gradient (see conv_few_channel_grad.h).
#include "layers/conv_few_channel_grad.h"

#include <omp.h>

#include <algorithm>

#include "core/error.h"
#include "layers/cpu_vector.h"

namespace poseidon {
namespace {

// Eight floats, loaded and stored without an alignment requirement.
constexpr int kLanes = 8;
typedef float Lanes __attribute__((vector_size(kLanes * sizeof(float)), aligned(4)));

// A task's register block: kOutputs outputs x kColumns kernel columns of one
// input channel and kernel row, a vector of partial sums each; beside them
// (column kColumns) the outputs' bias sums, kept by the first task of each
// output block.
constexpr int64_t kOutputs = 4, kColumns = 3, kBlockFloats = kOutputs * (kColumns + 1) * kLanes;

float* sum_at(float* block, int64_t output, int64_t column) {
  return block + (output * (kColumns + 1) + column) * kLanes;
}

// Adds one image's terms to a block's sums: each row of the kOutputs dy
// planes against the input row below it, shifted by each kernel column. x
// points at the input row of output row 0 and the block's first column;
// the last partial vector of a row is gathered lane by lane, so nothing is
// read past the rows. With kBias the block also sums dy itself.
template <int kUsedColumns, bool kBias>
__attribute__((always_inline)) inline void image_terms(const float* const dy[kOutputs], const float* x,
                                                       int64_t x_stride, int64_t out_h, int64_t out_w, float* sums) {
  Lanes acc[kOutputs][kUsedColumns], bias[kOutputs];
#pragma GCC unroll 4
  for (int r = 0; r < kOutputs; ++r) {
#pragma GCC unroll 3
    for (int k = 0; k < kUsedColumns; ++k) acc[r][k] = *reinterpret_cast<const Lanes*>(sum_at(sums, r, k));
    if (kBias) bias[r] = *reinterpret_cast<const Lanes*>(sum_at(sums, r, kColumns));
  }
  const int64_t whole = out_w / kLanes * kLanes, rest = out_w - whole;
  for (int64_t y = 0; y < out_h; ++y) {
    const float* row = x + y * x_stride;
    const int64_t at = y * out_w;
    for (int64_t v = 0; v < whole; v += kLanes) {
      Lanes d[kOutputs];
#pragma GCC unroll 4
      for (int r = 0; r < kOutputs; ++r) {
        d[r] = *reinterpret_cast<const Lanes*>(dy[r] + at + v);
        if (kBias) bias[r] += d[r];
      }
#pragma GCC unroll 3
      for (int k = 0; k < kUsedColumns; ++k) {
        const Lanes in = *reinterpret_cast<const Lanes*>(row + v + k);
#pragma GCC unroll 4
        for (int r = 0; r < kOutputs; ++r) acc[r][k] += d[r] * in;
      }
    }
    if (rest) {
      Lanes d[kOutputs] = {}, in[kUsedColumns] = {};
      for (int64_t l = 0; l < rest; ++l) {
        for (int r = 0; r < kOutputs; ++r) d[r][l] = dy[r][at + whole + l];
        for (int k = 0; k < kUsedColumns; ++k) in[k][l] = row[whole + l + k];
      }
#pragma GCC unroll 3
      for (int k = 0; k < kUsedColumns; ++k)
#pragma GCC unroll 4
        for (int r = 0; r < kOutputs; ++r) acc[r][k] += d[r] * in[k];
      if (kBias)
        for (int r = 0; r < kOutputs; ++r) bias[r] += d[r];
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < kOutputs; ++r) {
#pragma GCC unroll 3
    for (int k = 0; k < kUsedColumns; ++k) *reinterpret_cast<Lanes*>(sum_at(sums, r, k)) = acc[r][k];
    if (kBias) *reinterpret_cast<Lanes*>(sum_at(sums, r, kColumns)) = bias[r];
  }
}

template <bool kBias>
__attribute__((always_inline)) inline void dispatch_columns(int64_t columns, const float* const dy[kOutputs],
                                                            const float* x, int64_t x_stride, int64_t out_h,
                                                            int64_t out_w, float* sums) {
  switch (columns) {
    case 3:
      image_terms<3, kBias>(dy, x, x_stride, out_h, out_w, sums);
      break;
    case 2:
      image_terms<2, kBias>(dy, x, x_stride, out_h, out_w, sums);
      break;
    default:
      image_terms<1, kBias>(dy, x, x_stride, out_h, out_w, sums);
      break;
  }
}

POSEIDON_FMA_CLONES void block_image_terms(int64_t columns, bool bias, const float* const dy[kOutputs], const float* x,
                                           int64_t x_stride, int64_t out_h, int64_t out_w, float* sums) {
  if (bias)
    dispatch_columns<true>(columns, dy, x, x_stride, out_h, out_w, sums);
  else
    dispatch_columns<false>(columns, dy, x, x_stride, out_h, out_w, sums);
}

// The sum of a vector's lanes, in lane order.
float lane_sum(const float* lanes) {
  float total = 0.f;
  for (int l = 0; l < kLanes; ++l) total += lanes[l];
  return total;
}

// Where task t works: output block, input channel, kernel row, column block.
struct TaskPlace {
  int64_t output_block, channel, kernel_row, column_block;
};

}  // namespace

bool FewChannelWeightGrad::suits(const ConvGeometry& g, int64_t groups) {
  return groups == 1 && g.channels <= kMaxChannels && g.stride_h == 1 && g.stride_w == 1 && g.dilation_h == 1 &&
         g.dilation_w == 1 && g.fits();
}

FewChannelWeightGrad::FewChannelWeightGrad(const ConvGeometry& g, int64_t batch, int64_t num_output)
    : g_(g), batch_(batch), outputs_(num_output) {
  POSEIDON_CHECK(suits(g, 1)) << "FewChannelWeightGrad: unsupported geometry";
  output_blocks_ = (outputs_ + kOutputs - 1) / kOutputs;
  column_blocks_ = (g.kernel_w + kColumns - 1) / kColumns;
  tasks_ = output_blocks_ * g.channels * g.kernel_h * column_blocks_;
  if (g.pad_h || g.pad_w) padded_.assign(batch * g.channels * (g.height + 2 * g.pad_h) * (g.width + 2 * g.pad_w), 0.f);
  sums_.resize(tasks_ * kBlockFloats);
  zeros_.assign(g.out_height() * g.out_width(), 0.f);
}

void FewChannelWeightGrad::run(const float* x, const float* dy, float* dw, float* db) {
  const int64_t channels = g_.channels, kh = g_.kernel_h, kw = g_.kernel_w;
  const int64_t out_h = g_.out_height(), out_w = g_.out_width(), plane = out_h * out_w;
  const int64_t in_h = g_.height + 2 * g_.pad_h, in_w = g_.width + 2 * g_.pad_w;
  const float* in = x;
  if (!padded_.empty()) {  // the border stays zero from construction
    for (int64_t p = 0; p < batch_ * channels; ++p)
      for (int64_t y = 0; y < g_.height; ++y)
        std::copy_n(x + (p * g_.height + y) * g_.width, g_.width,
                    padded_.data() + (p * in_h + y + g_.pad_h) * in_w + g_.pad_w);
    in = padded_.data();
  }
  auto place = [&](int64_t t) {
    TaskPlace p;
    p.column_block = t % column_blocks_;
    t /= column_blocks_;
    p.kernel_row = t % kh;
    t /= kh;
    p.channel = t % channels;
    p.output_block = t / channels;
    return p;
  };
  std::fill(sums_.begin(), sums_.end(), 0.f);
  // Threads take runs of tasks (mostly of one output block, whose dy rows
  // stay in cache) and go through the batch image by image.
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), me = omp_get_thread_num();
    const int64_t first = tasks_ * me / threads, last = tasks_ * (me + 1) / threads;
    for (int64_t n = 0; n < batch_; ++n)
      for (int64_t t = first; t < last; ++t) {
        const TaskPlace p = place(t);
        const float* rows[kOutputs];
        for (int64_t r = 0; r < kOutputs; ++r) {
          const int64_t o = p.output_block * kOutputs + r;
          rows[r] = o < outputs_ ? dy + (n * outputs_ + o) * plane : zeros_.data();
        }
        const float* x_rows =
            in + ((n * channels + p.channel) * in_h + p.kernel_row) * in_w + p.column_block * kColumns;
        const int64_t columns = std::min(kColumns, kw - p.column_block * kColumns);
        const bool bias = db && p.channel == 0 && p.kernel_row == 0 && p.column_block == 0;
        block_image_terms(columns, bias, rows, x_rows, in_w, out_h, out_w, sums_.data() + t * kBlockFloats);
      }
  }
  for (int64_t t = 0; t < tasks_; ++t) {
    const TaskPlace p = place(t);
    float* sums = sums_.data() + t * kBlockFloats;
    for (int64_t r = 0; r < kOutputs; ++r) {
      const int64_t o = p.output_block * kOutputs + r;
      if (o >= outputs_) break;
      for (int64_t k = 0; k < kColumns && p.column_block * kColumns + k < kw; ++k)
        dw[((o * channels + p.channel) * kh + p.kernel_row) * kw + p.column_block * kColumns + k] =
            lane_sum(sum_at(sums, r, k));
      if (db && p.channel == 0 && p.kernel_row == 0 && p.column_block == 0) db[o] = lane_sum(sum_at(sums, r, kColumns));
    }
  }
}

}  // namespace poseidon
