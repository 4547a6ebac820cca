// Fuzzes the calibration reader (profiler/calibration_json.cpp): any bytes
// either read as a Calibration or fail with a one-line dtsim::Error. A
// calibration that reads must write out and read back to the same text.
#include "dtsim/profiler/calibration.hpp"
#include "fuzz_main.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    dtsim::fuzz::expect_only_user_errors([&] {
        const dtsim::calib::Calibration c =
            dtsim::calib::calibration_from_json_text(dtsim::fuzz::text_of(data, size), "fuzz.json");
        const std::string text = dtsim::calib::to_json_text(c);
        // What dtsim wrote, dtsim reads: an Error here is a bug, not a user's mistake.
        try {
            if (dtsim::calib::to_json_text(dtsim::calib::calibration_from_json_text(text, "rewritten.json")) != text)
                __builtin_trap();
        } catch (const dtsim::Error&) {
            __builtin_trap();
        }
    });
    return 0;
}
