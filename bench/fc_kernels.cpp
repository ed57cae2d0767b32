// The kernels behind the fc layer's float32 backward products, timed in the
// same run: oneDNN's first choice of matrix-product implementation against
// its JIT GEMM, which the layer asks for (layers/dnnl_support.h,
// kDnnlFloat32BackwardKernels), and at small batches the layer's own weight-
// gradient kernel against that GEMM (layers/small_batch_weight_grad.h). The
// shapes are the fc layers of models/mlp_2048.yaml, VGG19-22K at 32x32,
// models/lenet.yaml, and a 4096-wide layer over a range of batches.
//
//   fc_kernels_bench [rounds=15]
//
// Prints one line per product and shape: the median milliseconds of each
// and their ratio.
#include <cstdio>
#include <cstdlib>
#include <dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench/median_time.h"
#include "layers/dnnl_support.h"
#include "layers/small_batch_weight_grad.h"

namespace {

using dnnl::memory;
using Tag = memory::format_tag;

memory::desc matrix(int64_t rows, int64_t cols, Tag tag) { return {{rows, cols}, memory::data_type::f32, tag}; }

// One float32 product C = A B over the caller's buffers, by the
// implementation dnnl_matmul picks with `preferred`; A is read as `a_tag`
// lays it out (ba: the transpose of a row-major matrix, read in place). The
// stream and the memory objects are made once, so a timed run() is the
// primitive's execution alone.
class Product {
 public:
  Product(int64_t m, int64_t k, int64_t n, Tag a_tag, const char* preferred, const float* a, const float* b, float* c)
      : stream_(poseidon::dnnl_cpu_engine()) {
    const dnnl::engine& e = poseidon::dnnl_cpu_engine();
    const memory::desc a_desc = matrix(m, k, a_tag), b_desc = matrix(k, n, Tag::ab), c_desc = matrix(m, n, Tag::ab);
    const dnnl::matmul::primitive_desc pd =
        poseidon::dnnl_matmul({a_desc, b_desc, c_desc}, poseidon::dnnl_user_scratchpad(), preferred);
    name_ = pd.impl_info_str();
    prim_ = dnnl::matmul(pd);
    args_ = {{DNNL_ARG_SRC, memory(a_desc, e, const_cast<float*>(a))},
             {DNNL_ARG_WEIGHTS, memory(b_desc, e, const_cast<float*>(b))},
             {DNNL_ARG_DST, memory(c_desc, e, c)},
             {DNNL_ARG_SCRATCHPAD, memory(pd.scratchpad_desc(), e)}};
  }
  const std::string& name() const { return name_; }
  void run() {
    prim_.execute(stream_, args_);
    stream_.wait();
  }

 private:
  dnnl::stream stream_;
  std::string name_;
  dnnl::matmul prim_;
  std::unordered_map<int, memory> args_;
};

struct FcShape {
  int64_t batch, features, outputs;
  const char* where;
};

void print(const char* product, const FcShape& s, const char* first, double first_ms, const char* second,
           double second_ms) {
  std::printf("%-3s N=%-4lld F=%-6lld O=%-6lld %-22s %-16s %8.3f ms  %-16s %8.3f ms  ratio %.2f\n", product,
              static_cast<long long>(s.batch), static_cast<long long>(s.features), static_cast<long long>(s.outputs),
              s.where, first, first_ms, second, second_ms, first_ms / second_ms);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace poseidon;
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 15;
  if (rounds < 1) {
    std::fprintf(stderr, "fc_kernels_bench: rounds must be at least 1, got '%s'\n", argv[1]);
    return 1;
  }
  std::printf("oneDNN ISA %s, %d rounds, median ms; ratio = first / second\n", dnnl_cpu_isa().c_str(), rounds);
  const std::vector<FcShape> shapes = {
      {128, 3072, 2048, "mlp_2048 fc1"},  {128, 2048, 2048, "mlp_2048 fc2, fc3"},
      {32, 25088, 4096, "vgg19_22k_32 cls.0"}, {32, 4096, 4096, "vgg19_22k_32 cls.3"},
      {32, 4096, 21841, "vgg19_22k_32 cls.6"}, {64, 800, 500, "lenet fc1"},
      {64, 4096, 512, ""}};
  for (const FcShape& s : shapes) {
    std::vector<float> x(s.batch * s.features, 0.5f), w(s.outputs * s.features, 0.25f), dy(s.batch * s.outputs, 0.1f);
    std::vector<float> dx(x.size()), dw(w.size());
    for (const char* product : {"dX", "dW"}) {
      const bool data = product[1] == 'X';
      // dX[N,F] = dY[N,O] W[O,F]; dW[O,F] = dY^T[O,N] X[N,F].
      const int64_t m = data ? s.batch : s.outputs, k = data ? s.outputs : s.batch;
      const Tag a_tag = data ? Tag::ab : Tag::ba;
      const float* b = data ? w.data() : x.data();
      float* c = data ? dx.data() : dw.data();
      Product first(m, k, s.features, a_tag, nullptr, dy.data(), b, c);
      Product jit(m, k, s.features, a_tag, "gemm:jit", dy.data(), b, c);
      const double first_ms = median_time<std::milli>(rounds, [&] { first.run(); });
      const double jit_ms = median_time<std::milli>(rounds, [&] { jit.run(); });
      print(product, s, first.name().c_str(), first_ms, jit.name().c_str(), jit_ms);
    }
  }
  if (!f32_weight_grad_supported()) return 0;
  for (int64_t batch : {1, 4, 8, 12, 16, 24, 32}) {
    const FcShape s{batch, 4096, 4096, "small-batch dW"};
    std::vector<float> x(s.batch * s.features, 0.5f), dy(s.batch * s.outputs, 0.1f), dw(s.outputs * s.features);
    Product jit(s.outputs, s.batch, s.features, Tag::ba, "gemm:jit", dy.data(), x.data(), dw.data());
    const double kernel_ms =
        median_time<std::milli>(rounds, [&] { f32_weight_grad(dy.data(), x.data(), s.batch, s.features, s.outputs, dw.data()); });
    const double jit_ms = median_time<std::milli>(rounds, [&] { jit.run(); });
    print("dW", s, "layer's kernel", kernel_ms, jit.name().c_str(), jit_ms);
  }
  return 0;
}
