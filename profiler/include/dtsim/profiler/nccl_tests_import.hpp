// Reads nccl-tests output, the text table or the -J JSON (formats.md §8), into
// collective curves.
#pragma once

#include "dtsim/profiler/calibration.hpp"

#include <optional>
#include <string>
#include <vector>

namespace dtsim::profiler {

// nccl-tests times each size twice: into a separate output buffer
// (out-of-place) and into the input buffer (in-place, as DDP's allreduce and
// FSDP's flat-buffer collectives run).
enum class NcclTestsGroup { out_of_place, in_place };
NcclTestsGroup nccl_tests_group_from_string(const std::string& name);  // "out-of-place" / "in-place"
std::string to_string(NcclTestsGroup g);

struct NcclTestsRun {
    calib::CollectiveKind kind;
    int nranks = 0;
    std::vector<calib::CollectivePoint> points;  // the group's times
    std::string nccl_version;                    // when the output says
    std::string type;                            // the `type` column: float, half, bfloat16, int8, ...
    std::optional<DType> dtype;                  // the type dtsim prices it as; none for int, double, fp8
    NcclTestsGroup group = NcclTestsGroup::out_of_place;  // whose times `points` holds
};

// Parse errors name the file and the line (text) or JSON field. A table or
// file holding several element types (-d all) gives one run per type.
std::vector<NcclTestsRun> parse_nccl_tests_text(const std::string& text, const std::string& file,
                                                NcclTestsGroup group = NcclTestsGroup::out_of_place);
std::vector<NcclTestsRun> parse_nccl_tests_json(const std::string& text, const std::string& file,
                                                NcclTestsGroup group = NcclTestsGroup::out_of_place);
// Either form, by content.
std::vector<NcclTestsRun> parse_nccl_tests(const std::string& text, const std::string& file,
                                           NcclTestsGroup group = NcclTestsGroup::out_of_place);
std::vector<NcclTestsRun> read_nccl_tests(const std::string& path,
                                          NcclTestsGroup group = NcclTestsGroup::out_of_place);

}  // namespace dtsim::profiler
