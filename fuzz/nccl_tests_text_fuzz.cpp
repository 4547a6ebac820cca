// Fuzzes the nccl-tests text-table reader (profiler/nccl_tests_import.cpp).
#include "nccl_tests_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    dtsim::fuzz::expect_only_user_errors([&] {
        dtsim::fuzz::import_and_round_trip(
            dtsim::profiler::parse_nccl_tests_text(dtsim::fuzz::text_of(data, size), "all_reduce_perf.txt"));
    });
    return 0;
}
