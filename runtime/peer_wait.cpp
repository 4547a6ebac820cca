// wait_for_peers: a barrier whose waiters sleep. Where every rank of the
// communicator shares a host (the CPU backend's case), it is a counter in a
// shared-memory page and a futex: the last rank to arrive wakes the others
// at once. Elsewhere, a nonblocking MPI barrier polled with backing-off sleeps.
#include "dtsim/runtime/peer_wait.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string_view>
#include <thread>

namespace dtsim::runtime {

namespace {

// The shared page: how many ranks have arrived, and the generation that the
// last of them advances (waiters sleep on it).
struct BarrierWords {
    std::uint32_t arrived;
    std::uint32_t generation;
};

// Cached on the communicator (an MPI attribute): the page, or null where the
// ranks do not share a host.
struct PeerBarrier {
    BarrierWords* words = nullptr;
    int size = 1;
};

constexpr std::size_t kPageBytes = 4096;

int delete_barrier(MPI_Comm, int, void* value, void*) {
    auto* b = static_cast<PeerBarrier*>(value);
    if (b->words != nullptr) munmap(b->words, kPageBytes);
    delete b;
    return MPI_SUCCESS;
}

int barrier_keyval() {
    static const int keyval = [] {
        int k = MPI_KEYVAL_INVALID;
        MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_barrier, &k, nullptr);
        return k;
    }();
    return keyval;
}

// Maps a page that every rank of `comm` shares, or returns null on every rank
// where one cannot (ranks on several hosts, no /dev/shm). Collective.
BarrierWords* map_shared_page(MPI_Comm comm) {
    int rank = 0, size = 1, node_size = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    MPI_Comm node = MPI_COMM_NULL;
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &node_size);
    MPI_Comm_free(&node);
    if (node_size != size) return nullptr;  // the same answer on every rank

    // Rank 0 creates the segment under a name unique to it and tells the others.
    static std::atomic<int> counter{0};
    std::array<char, 64> name{};
    int ok = 1;
    bool created = false;
    void* page = MAP_FAILED;
    if (rank == 0) {
        std::snprintf(name.data(), name.size(), "/dtsim-peer-wait-%d-%d", static_cast<int>(getpid()), counter++);
        const int fd = shm_open(name.data(), O_CREAT | O_EXCL | O_RDWR, 0600);
        created = fd >= 0;
        if (fd >= 0 && ftruncate(fd, kPageBytes) == 0)
            page = mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (fd >= 0) close(fd);
        ok = page != MAP_FAILED;
    }
    MPI_Bcast(name.data(), static_cast<int>(name.size()), MPI_CHAR, 0, comm);
    MPI_Bcast(&ok, 1, MPI_INT, 0, comm);
    if (ok != 0 && rank != 0) {
        const int fd = shm_open(name.data(), O_RDWR, 0600);
        if (fd >= 0) page = mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (fd >= 0) close(fd);
        ok = page != MAP_FAILED;
    }
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);  // also: every rank has mapped it
    if (created) shm_unlink(name.data());                    // the mappings keep it
    if (all_ok == 0) {
        if (page != MAP_FAILED) munmap(page, kPageBytes);
        return nullptr;
    }
    return static_cast<BarrierWords*>(page);  // a new segment reads as zeros
}

// DTSIM_PEER_WAIT=polled: every communicator uses the polled nonblocking
// barrier, as ranks on several hosts do, so that tests on one host run that
// path too. Must be set alike on every rank (mpirun -x).
bool polled_barrier_forced() {
    static const bool forced = [] {
        const char* v = std::getenv("DTSIM_PEER_WAIT");
        return v != nullptr && std::string_view(v) == "polled";
    }();
    return forced;
}

PeerBarrier& barrier_of(MPI_Comm comm) {
    void* value = nullptr;
    int found = 0;
    MPI_Comm_get_attr(comm, barrier_keyval(), &value, &found);
    if (found != 0) return *static_cast<PeerBarrier*>(value);
    auto* b = new PeerBarrier;
    MPI_Comm_size(comm, &b->size);
    if (b->size > 1 && !polled_barrier_forced()) b->words = map_shared_page(comm);
    MPI_Comm_set_attr(comm, barrier_keyval(), b);
    return *b;
}

long futex(std::uint32_t* word, int op, std::uint32_t value, const timespec* timeout) {
    // Not FUTEX_PRIVATE: the word is shared between processes.
    return syscall(SYS_futex, word, op, value, timeout, nullptr, 0);
}

// While waiters sleep, they look at `stop` this often.
constexpr timespec kStopCheck{0, 50'000'000};

// Ranks are separate processes: the counters must be lock-free to be shared.
static_assert(std::atomic_ref<std::uint32_t>::is_always_lock_free);

bool shared_page_barrier(const PeerBarrier& b, const std::atomic<bool>* stop) {
    std::atomic_ref<std::uint32_t> arrived(b.words->arrived);
    std::atomic_ref<std::uint32_t> generation(b.words->generation);
    const std::uint32_t gen = generation.load(std::memory_order_acquire);
    if (arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<std::uint32_t>(b.size)) {
        // The last to arrive resets the count before it opens the barrier, so
        // that a rank already at the next one counts there.
        arrived.store(0, std::memory_order_relaxed);
        generation.fetch_add(1, std::memory_order_release);
        futex(&b.words->generation, FUTEX_WAKE, INT_MAX, nullptr);
        return true;
    }
    while (generation.load(std::memory_order_acquire) == gen) {
        if (stop != nullptr && stop->load(std::memory_order_relaxed)) return false;
        // Returns at once if the generation moved on; without a stop flag, sleeps until woken.
        futex(&b.words->generation, FUTEX_WAIT, gen, stop != nullptr ? &kStopCheck : nullptr);
    }
    return true;
}

// Between polls: short at first, as peers are often about to arrive, then
// backing off, as each poll and wake-up costs some 20 us of CPU (a fixed
// 20 us interval burned 45 % of a core). The cap bounds the latency it adds.
constexpr auto kFirstPollInterval = std::chrono::microseconds(10);
constexpr auto kMaxPollInterval = std::chrono::microseconds(200);

bool polled_barrier(MPI_Comm comm, const std::atomic<bool>* stop) {
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Ibarrier(comm, &request);
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    for (auto interval = kFirstPollInterval; done == 0; interval = std::min(2 * interval, kMaxPollInterval)) {
        // A nonblocking collective cannot be cancelled: on a stop it is left
        // pending, as the run that stops is failing.
        if (stop != nullptr && stop->load(std::memory_order_relaxed)) return false;
        std::this_thread::sleep_for(interval);
        MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    }
    return true;
}

}  // namespace

void prepare_peer_wait(MPI_Comm comm) {
    (void)barrier_of(comm);
}

bool wait_for_peers(MPI_Comm comm, const std::atomic<bool>* stop) {
    // Timer slack (50 us by default) would stretch every sleep to the slack.
    thread_local const bool tight = prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL) == 0;
    (void)tight;
    const PeerBarrier& b = barrier_of(comm);
    if (b.size <= 1) return true;
    return b.words != nullptr ? shared_page_barrier(b, stop) : polled_barrier(comm, stop);
}

}  // namespace dtsim::runtime
