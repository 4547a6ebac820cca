#include "dtsim/advisor/mpi_sweep.hpp"

#include "dtsim/common/error.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>

namespace dtsim::advisor {
namespace {

template <class T>
void put(std::string& out, const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    char buf[sizeof(T)];
    std::memcpy(buf, &v, sizeof(T));
    out.append(buf, sizeof(T));
}

struct Reader {
    const std::string& bytes;
    std::size_t pos = 0;
    template <class T>
    T get() {
        if (bytes.size() - pos < sizeof(T)) throw Error("sweep results from another rank are truncated");
        T v;
        std::memcpy(&v, bytes.data() + pos, sizeof(T));
        pos += sizeof(T);
        return v;
    }
    std::string str() {
        const auto n = get<std::uint32_t>();
        if (bytes.size() - pos < n) throw Error("sweep results from another rank are truncated");
        std::string s = bytes.substr(pos, n);
        pos += n;
        return s;
    }
};

int env_size(const char* name) {
    const char* v = std::getenv(name);
    return v ? std::atoi(v) : 0;
}

void check(int rc, const char* what) {
    if (rc != MPI_SUCCESS) throw Error(fmt::format("MPI error in {} while gathering the sweep", what));
}

}  // namespace

bool launched_by_mpirun() {
    return env_size("OMPI_COMM_WORLD_SIZE") > 1 || env_size("PMI_SIZE") > 1 || env_size("PMIX_SIZE") > 1;
}

std::string serialize_results(const std::vector<SweepResult>& results) {
    std::string out;
    out.reserve(results.size() * 72);
    put(out, static_cast<std::uint64_t>(results.size()));
    for (const auto& r : results) {
        const std::uint8_t flags = static_cast<std::uint8_t>((r.simulated ? 1 : 0) | (r.fits ? 2 : 0));
        put(out, flags);
        if (r.simulated) {
            put(out, r.step_time_s);
            put(out, r.samples_per_s);
            put(out, r.tokens_per_s);
            put(out, r.mfu);
            put(out, r.compute_s);
            put(out, r.exposed_comm_s);
            put(out, r.peak_memory_bytes);
            put(out, r.usable_memory_bytes);
        }
        put(out, static_cast<std::uint32_t>(r.why.size()));
        out += r.why;
    }
    return out;
}

void deserialize_results(const std::string& bytes, std::vector<SweepResult>& out, std::size_t first,
                         std::size_t stride) {
    Reader in{bytes};
    const auto n = in.get<std::uint64_t>();
    for (std::uint64_t k = 0; k < n; ++k) {
        const std::size_t i = first + static_cast<std::size_t>(k) * stride;
        if (i >= out.size()) throw Error("sweep results from another rank do not match this rank's configurations");
        SweepResult& r = out[i];
        const auto flags = in.get<std::uint8_t>();
        r.simulated = (flags & 1) != 0;
        r.fits = (flags & 2) != 0;
        if (r.simulated) {
            r.step_time_s = in.get<double>();
            r.samples_per_s = in.get<double>();
            r.tokens_per_s = in.get<double>();
            r.mfu = in.get<double>();
            r.compute_s = in.get<double>();
            r.exposed_comm_s = in.get<double>();
            r.peak_memory_bytes = in.get<std::int64_t>();
            r.usable_memory_bytes = in.get<std::int64_t>();
        }
        r.why = in.str();
    }
    if (in.pos != bytes.size()) throw Error("sweep results from another rank have trailing bytes");
}

DistributedSweep run_sweep_mpi(const std::vector<Candidate>& candidates, const calib::Calibration& calibration,
                               const SweepProgress& progress) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized == 0) {
        setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
        setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
        int provided = 0;
        check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
        std::atexit([] {
            int finalized = 0;
            MPI_Finalized(&finalized);
            if (finalized == 0) MPI_Finalize();
        });
    }
    DistributedSweep d;
    MPI_Comm_rank(MPI_COMM_WORLD, &d.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d.size);
    const auto rank = static_cast<std::size_t>(d.rank);
    const auto size = static_cast<std::size_t>(d.size);

    std::vector<Candidate> share;
    for (std::size_t i = rank; i < candidates.size(); i += size) share.push_back(candidates[i]);
    const std::string bytes = serialize_results(run_sweep(share, calibration, progress));
    if (bytes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
        throw Error("a rank's sweep results exceed 2 GiB; use more ranks");

    const int my_len = static_cast<int>(bytes.size());
    std::vector<int> lens(d.rank == 0 ? size : 0), displs;
    check(MPI_Gather(&my_len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Gather");
    std::string all;
    if (d.rank == 0) {
        std::size_t total = 0;
        for (int l : lens) {
            displs.push_back(static_cast<int>(total));
            total += static_cast<std::size_t>(l);
        }
        if (total > static_cast<std::size_t>(std::numeric_limits<int>::max()))
            throw Error("the gathered sweep results exceed 2 GiB");
        all.resize(total);
    }
    check(MPI_Gatherv(bytes.data(), my_len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, 0,
                      MPI_COMM_WORLD),
          "MPI_Gatherv");
    if (d.rank == 0) {
        d.results.resize(candidates.size());
        for (std::size_t i = 0; i < candidates.size(); ++i) d.results[i].candidate = candidates[i];
        for (std::size_t r = 0; r < size; ++r)
            deserialize_results(all.substr(static_cast<std::size_t>(displs[r]), static_cast<std::size_t>(lens[r])),
                                d.results, r, size);
    }
    return d;
}

}  // namespace dtsim::advisor
