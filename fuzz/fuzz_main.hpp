// What every fuzz target shares: the input as text, and the rule that a
// dtsim::Error (a user's mistake, reported with its file and field) is an
// expected outcome while anything else is a bug. InternalError, other
// exceptions, crashes and sanitizer reports end the run and keep the input.
#pragma once

#include "dtsim/common/error.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

namespace dtsim::fuzz {

inline std::string text_of(const std::uint8_t* data, std::size_t size) {
    return std::string(reinterpret_cast<const char*>(data), size);
}

// Runs body(); a dtsim::Error is expected and swallowed, after checking that
// its message is one line, as the CLI prints it.
template <class F>
void expect_only_user_errors(F&& body) {
    try {
        body();
    } catch (const dtsim::Error& e) {
        const std::string what = e.what();
        if (what.empty() || what.find('\n') != std::string::npos) __builtin_trap();  // one line, never empty
    }
}

}  // namespace dtsim::fuzz
