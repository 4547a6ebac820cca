// User-facing errors (one hierarchy, caught in main and mapped to exit codes)
// and DTSIM_ASSERT for internal invariants.
#pragma once

#include <stdexcept>
#include <string>

namespace dtsim {

// Base of every error a user can cause and fix. what() is one or more complete
// sentences that say what was wrong and how to fix it.
class Error : public std::runtime_error {
public:
    // what() is always one line: control characters that came from a user's
    // input (a newline inside a JSON string, a tab in an argument) are escaped.
    explicit Error(const std::string& what);
    virtual int exit_code() const { return 2; }
};

// A command-line value or strategy knob that is unknown or out of range.
class ConfigError : public Error {
public:
    using Error::Error;
};

// A file that cannot be read or does not follow its format. Carries the file
// and the JSON path (e.g. "/collectives/2/points") of the offending field.
class ParseError : public Error {
public:
    ParseError(std::string file, std::string field, const std::string& what);
    const std::string& file() const { return file_; }
    const std::string& field() const { return field_; }

private:
    std::string file_;
    std::string field_;
};

// A calibration that lacks data a simulation needs.
class CalibrationError : public Error {
public:
    using Error::Error;
};

// The configuration is valid but does not fit in device memory.
class DoesNotFitError : public Error {
public:
    using Error::Error;
    int exit_code() const override { return 3; }
};

// A broken internal invariant: a bug in dtsim, never the user's fault.
class InternalError : public std::logic_error {
public:
    using std::logic_error::logic_error;
};

[[noreturn]] void assert_failed(const char* expr, const char* file, int line, const std::string& message);

}  // namespace dtsim

#define DTSIM_ASSERT(expr, message)                                              \
    do {                                                                         \
        if (!(expr)) ::dtsim::assert_failed(#expr, __FILE__, __LINE__, message); \
    } while (false)
