// One BLAS thread while it lives, the caller's count restored after (private
// to profiler/): every rank measures one core's worth of compute.
#pragma once

#include <cblas.h>

namespace dtsim::profiler {

class OneBlasThread {
public:
    OneBlasThread() : saved_(openblas_get_num_threads()) { openblas_set_num_threads(1); }
    ~OneBlasThread() { openblas_set_num_threads(saved_); }
    OneBlasThread(const OneBlasThread&) = delete;
    OneBlasThread& operator=(const OneBlasThread&) = delete;

private:
    int saved_;
};

}  // namespace dtsim::profiler
