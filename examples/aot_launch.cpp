// Ahead-of-time use from C++ without Python: load a cubin and its `wwc --meta` JSON, launch the
// vector add kernel of examples/vector_add.py on a stream, and check the result on the host.
//
// Compile the kernel ahead of time (one command line):
//   wwc examples/vector_add.py --kernel add_kernel --target sm_90a --emit cubin -o add.cubin
//       --meta add.json --signature
//       "x_ptr:*fp32:16,y_ptr:*fp32:16,out_ptr:*fp32:16,n:i32,BLOCK=1024"
// then run this program (CMake target aot_launch, e.g. build/py/aot_launch after scripts/test):
//   aot_launch add.cubin add.json 1000003
#include "warpweave/runtime.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s KERNEL.cubin KERNEL.json [N]\n", argv[0]);
    return 2;
  }
  const int n = argc > 3 ? std::atoi(argv[3]) : 1000003;
  std::string why;
  if (!ww::cudaAvailable(&why)) {
    std::fprintf(stderr, "no GPU to run on: %s\n", why.c_str());
    return 1;
  }
  try {
    ww::GpuKernel kernel = ww::GpuKernel::fromFiles(argv[1], argv[2]);
    // The metadata lists the runtime parameters in launch order; this host code is written for
    // the vector add kernel and checks that it got it.
    const auto& params = kernel.params();
    if (params.size() != 4 || params[3].type != "i32") {
      std::fprintf(stderr, "%s: expected add_kernel(x_ptr, y_ptr, out_ptr, n: i32)\n", argv[2]);
      return 2;
    }
    std::vector<float> x(n), y(n), out(n);
    for (int i = 0; i < n; ++i) {
      x[i] = std::sin(0.001f * i);
      y[i] = std::cos(0.002f * i);
    }
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    ww::DeviceBuffer dx(bytes), dy(bytes), dout(bytes);
    dx.upload(x.data(), bytes);
    dy.upload(y.data(), bytes);
    dout.fill(0xFF); // NaN: any element the kernel misses shows up

    // BLOCK was folded into the kernel at compile time; the metadata does not say its value, so
    // the grid here assumes the 1024 of the command above.
    const unsigned block = 1024;
    const unsigned grid = (static_cast<unsigned>(n) + block - 1) / block;
    kernel.launch({grid, 1, 1}, /*stream=*/nullptr,
                  {ww::LaunchArg::pointer(dx.address()), ww::LaunchArg::pointer(dy.address()),
                   ww::LaunchArg::pointer(dout.address()), ww::LaunchArg::integer(n)});
    ww::synchronize(nullptr);
    dout.download(out.data(), bytes);
    int wrong = 0;
    for (int i = 0; i < n; ++i)
      if (out[i] != x[i] + y[i]) ++wrong;
    std::printf("%s: %d warps, %d B shared memory; vector add of %d floats: %s\n",
                kernel.name().c_str(), kernel.numWarps(), kernel.sharedBytes(), n,
                wrong ? "WRONG" : "correct");
    return wrong ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
