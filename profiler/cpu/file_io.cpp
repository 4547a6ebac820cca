// File I/O microbenchmark (NVMe offload): fsync'ed writes and cold reads of a
// real file with POSIX calls, in 4 MiB chunks as offload engines issue them.
#include "dtsim/common/error.hpp"
#include "dtsim/profiler/cpu_benchmarks.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <vector>

namespace dtsim::profiler {

namespace {

constexpr std::size_t kChunk = std::size_t{4} << 20;

std::string errno_text(int err) {
    return std::strerror(err);
}

// Closes a descriptor on every path.
class Fd {
public:
    explicit Fd(int fd) : fd_(fd) {}
    ~Fd() {
        if (fd_ >= 0) ::close(fd_);
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    int get() const { return fd_; }
    // Closes now and reports the error (a failed close can lose written data).
    int close() {
        const int rc = ::close(fd_);
        fd_ = -1;
        return rc;
    }

private:
    int fd_;
};

// Removes the benchmark file however the benchmark ends.
class RemoveOnExit {
public:
    explicit RemoveOnExit(std::string path) : path_(std::move(path)) {}
    ~RemoveOnExit() { ::unlink(path_.c_str()); }
    RemoveOnExit(const RemoveOnExit&) = delete;
    RemoveOnExit& operator=(const RemoveOnExit&) = delete;

private:
    std::string path_;
};

void write_file(const std::string& path, const std::vector<char>& buffer, std::int64_t bytes) {
    Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600));
    if (fd.get() < 0) throw Error(fmt::format("cannot write the benchmark file '{}': {}", path, errno_text(errno)));
    std::int64_t left = bytes;
    while (left > 0) {
        const auto want = static_cast<std::size_t>(std::min<std::int64_t>(left, static_cast<std::int64_t>(kChunk)));
        std::size_t done = 0;
        while (done < want) {
            const ssize_t w = ::write(fd.get(), buffer.data() + done, want - done);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0)
                throw Error(fmt::format("writing the benchmark file '{}' failed: {}", path,
                                        w < 0 ? errno_text(errno) : std::string("no progress")));
            done += static_cast<std::size_t>(w);
        }
        left -= static_cast<std::int64_t>(want);
    }
    if (::fsync(fd.get()) != 0)
        throw Error(fmt::format("fsync of the benchmark file '{}' failed: {}", path, errno_text(errno)));
    if (fd.close() != 0)
        throw Error(fmt::format("closing the benchmark file '{}' failed: {}", path, errno_text(errno)));
}

void read_file(const std::string& path, std::vector<char>& buffer, std::int64_t bytes) {
    Fd fd(::open(path.c_str(), O_RDONLY));
    if (fd.get() < 0) throw Error(fmt::format("cannot read the benchmark file '{}': {}", path, errno_text(errno)));
    std::int64_t total = 0;
    for (;;) {
        const ssize_t r = ::read(fd.get(), buffer.data(), buffer.size());
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) throw Error(fmt::format("reading the benchmark file '{}' failed: {}", path, errno_text(errno)));
        if (r == 0) break;
        total += r;
    }
    if (total != bytes)
        throw Error(fmt::format("the benchmark file '{}' read back {} bytes of {}", path, total, bytes));
}

// Asks the kernel to drop the (clean, fsync'ed) file from the page cache, so the
// read comes from the device. Best effort: not every file system honours it.
void drop_from_cache(const std::string& path) {
#if defined(POSIX_FADV_DONTNEED)
    Fd fd(::open(path.c_str(), O_RDONLY));
    if (fd.get() >= 0) {
        ::fdatasync(fd.get());
        ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
    }
#else
    (void)path;
#endif
}

}  // namespace

FileIoResult bench_file_io(const std::string& directory, std::int64_t bytes, const RepeatPolicy& policy) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::is_directory(directory, ec))
        throw Error(
            fmt::format("the file I/O benchmark directory '{}' does not exist or is not a directory; "
                        "pass an existing, writable directory",
                        directory));
    if (bytes <= 0) throw Error(fmt::format("the file I/O benchmark needs a positive size, not {} bytes", bytes));

    static std::atomic<int> counter{0};
    const std::string path =
        (fs::path(directory) / fmt::format(".dtsim_io_bench_{}_{}.tmp", ::getpid(), counter++)).string();
    // Create it exclusively first, so that an unwritable directory is reported as
    // such and an existing file is never clobbered.
    {
        Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600));
        if (fd.get() < 0)
            throw Error(fmt::format("cannot create a file in the file I/O benchmark directory '{}': {}", directory,
                                    errno_text(errno)));
    }
    const RemoveOnExit remove(path);

    // A non-constant pattern, so that no layer can compress or skip zeroes.
    std::vector<char> buffer(kChunk);
    for (std::size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<char>((i * 131 + 7) & 0xff);

    const Measurement write = measure(policy, [&] {
        const auto start = std::chrono::steady_clock::now();
        write_file(path, buffer, bytes);
        return elapsed_us(start);
    });
    const Measurement read = measure(policy, [&] {
        drop_from_cache(path);
        const auto start = std::chrono::steady_clock::now();
        read_file(path, buffer, bytes);
        return elapsed_us(start);
    });
    const auto b = static_cast<double>(bytes);
    return {b / (write.mean_us * 1e3), b / (read.mean_us * 1e3)};
}

}  // namespace dtsim::profiler
