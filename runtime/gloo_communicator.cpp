// The gloo communicator: gloo's TCP transport and collectives, called the way
// torch's ProcessGroupGloo calls them on CPU tensors (torch/csrc/distributed/
// c10d/ProcessGroupGloo.cpp):
//  - allreduce: gloo::allreduce (ring), sum; fp16 sums convert each element to
//    float, add and round once, as torch >= 2.8's c10::Half sum does, or run
//    gloo's own gloo::float16 sum, as torch < 2.8 did (HalfSum);
//  - all-gather: gloo::allgather into a fresh flat buffer, then copied into the
//    output (AsyncAllgatherWork);
//  - reduce-scatter: gloo has none. torch clones the input, allreduces the
//    whole clone and copies out this rank's chunk, so a reduce-scatter of S
//    bytes costs an allreduce of S bytes plus two copies;
//  - broadcast, reduce: gloo::broadcast, gloo::reduce.
// Each call takes the next tag as it is issued, as ProcessGroupGloo's nextTag()
// does, and runs on one of the communicator's two worker threads, as
// ProcessGroupGloo's AsyncWork runs on its worker threads (on a small machine
// that hand-off is part of the latency torch pays): a blocking call while the
// caller waits, an asynchronous one beside at most one other.
// Bootstrap: instead of torch's TCPStore rendezvous, the ranks exchange their
// pairs' addresses over MPI (one all-gather) and connect the full mesh.
#include "dtsim/runtime/communicator.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/common/half.hpp"

#include <fmt/format.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/context.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>
#include <netdb.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dtsim::runtime {
namespace {

// torch's default process-group timeout is 30 minutes; a training step that
// long is a hang. The executor's watchdog reports hangs sooner.
constexpr std::chrono::milliseconds kTimeout{std::chrono::minutes(5)};

// Whether `host` resolves to an address this process can bind, as torch's
// doesHostnameResolveToUsableAddress checks before using the host name.
bool resolves_to_bindable_address(const char* host) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* result = nullptr;
    if (getaddrinfo(host, nullptr, &hints, &result) != 0 || result == nullptr) return false;
    bool bindable = false;
    for (const addrinfo* a = result; a != nullptr && !bindable; a = a->ai_next) {
        const int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0) continue;
        bindable = bind(fd, a->ai_addr, a->ai_addrlen) == 0;
        close(fd);
    }
    freeaddrinfo(result);
    return bindable;
}

// One TCP device per process (torch makes one per process group; the device
// is only the listening socket and the event loop).
std::shared_ptr<gloo::transport::Device> tcp_device() {
    static std::mutex m;
    static std::shared_ptr<gloo::transport::Device> device;
    std::lock_guard lock(m);
    if (device) return device;
    gloo::transport::tcp::attr attr;
    if (const char* iface = std::getenv("GLOO_SOCKET_IFNAME"); iface != nullptr && *iface != '\0') {
        attr.iface = iface;
        device = gloo::transport::tcp::CreateDevice(attr);
        return device;
    }
    // torch's default: this host's name if it resolves to an address we can
    // bind, else the loopback. The check comes first: gloo's own lookup
    // dereferences an unset result when getaddrinfo fails (a fresh root with
    // no /etc/hosts entry for its name crashed there).
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) == 0 && host[0] != '\0' && resolves_to_bindable_address(host)) {
        try {
            attr.hostname = host;
            device = gloo::transport::tcp::CreateDevice(attr);
            return device;
        } catch (const std::exception&) {
        }
    }
    attr = {};
    attr.hostname = "127.0.0.1";
    device = gloo::transport::tcp::CreateDevice(attr);
    return device;
}

// A gloo context whose full mesh is connected by exchanging the pairs'
// addresses over an MPI communicator.
class MpiBootstrappedContext : public gloo::Context {
public:
    MpiBootstrappedContext(MPI_Comm comm, int my_rank, int group_size) : gloo::Context(my_rank, group_size) {
        device_ = tcp_device();
        auto transport = device_->createContext(rank, size);
        transport->setTimeout(kTimeout);
        timeout_ = kTimeout;
        // Every rank's block holds its address for each peer (slot `rank` unused).
        std::vector<std::vector<char>> mine(static_cast<std::size_t>(size));
        std::size_t width = 0;
        for (int peer = 0; peer < size; ++peer) {
            if (peer == rank) continue;
            mine[static_cast<std::size_t>(peer)] = transport->createPair(peer)->address().bytes();
            width = std::max(width, mine[static_cast<std::size_t>(peer)].size());
        }
        unsigned long long widest = width;
        MPI_Allreduce(MPI_IN_PLACE, &widest, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, comm);
        width = static_cast<std::size_t>(widest);
        std::vector<char> block(width * static_cast<std::size_t>(size), 0);
        for (int peer = 0; peer < size; ++peer) {
            const auto& a = mine[static_cast<std::size_t>(peer)];
            std::copy(a.begin(), a.end(), block.begin() + static_cast<std::ptrdiff_t>(width * peer));
        }
        std::vector<char> all(block.size() * static_cast<std::size_t>(size));
        MPI_Allgather(block.data(), static_cast<int>(block.size()), MPI_CHAR, all.data(), static_cast<int>(block.size()),
                      MPI_CHAR, comm);
        for (int peer = 0; peer < size; ++peer) {
            if (peer == rank) continue;
            // The peer's address for its pair with this rank.
            const auto at = static_cast<std::size_t>(peer) * block.size() + width * static_cast<std::size_t>(rank);
            const auto& expected = mine[static_cast<std::size_t>(peer)];  // same transport: same address size
            std::vector<char> theirs(all.begin() + static_cast<std::ptrdiff_t>(at),
                                     all.begin() + static_cast<std::ptrdiff_t>(at + expected.size()));
            transport->getPair(peer)->connect(theirs);
        }
        transportContext_ = std::move(transport);
    }
};

// ProcessGroupGloo's worker threads (Options::threads: 2 per device, one
// device): a queue of calls, each run by whichever thread is free, in the
// order they were queued. run() queues a call and waits for it (its exception
// travels back); post() queues one and returns.
class Workers {
public:
    explicit Workers(int threads) {
        for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { loop(); });
    }
    ~Workers() {
        {
            std::lock_guard lock(mu_);
            stop_ = true;
        }
        cv_.notify_all();
        for (auto& t : threads_) t.join();
    }
    Workers(const Workers&) = delete;
    Workers& operator=(const Workers&) = delete;

    void run(std::function<void()> fn) {
        std::packaged_task<void()> task(std::move(fn));
        std::future<void> done = task.get_future();
        post([&task] { task(); });
        done.get();
    }
    void post(std::function<void()> fn) {
        {
            std::lock_guard lock(mu_);
            queue_.push_back(std::move(fn));
        }
        cv_.notify_one();
    }

private:
    void loop() {
        for (;;) {
            std::function<void()> fn;
            {
                std::unique_lock lock(mu_);
                cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
                if (queue_.empty()) return;  // stopping, every queued call run
                fn = std::move(queue_.front());
                queue_.pop_front();
            }
            fn();
        }
    }

    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::function<void()>> queue_;
    bool stop_ = false;
    std::vector<std::thread> threads_;  // last: started once the rest exists
};

// ProcessGroupGloo::Options::threads: two worker threads per device.
constexpr int kWorkerThreads = 2;

class GlooCommunicator final : public Communicator {
public:
    GlooCommunicator(MPI_Comm comm, int rank, int size, HalfSum half_sum)
        : Communicator(rank, size),
          context_(std::make_shared<MpiBootstrappedContext>(comm, rank, size)),
          half_sum_(half_sum == HalfSum::gloo ? static_cast<ReduceFn>(&gloo::sum<gloo::float16>) : &c10_half_sum) {}
    CommBackend backend() const override { return CommBackend::gloo; }

    // Each call takes its tag here, on the issuing thread, as ProcessGroupGloo's
    // nextTag() does when work is enqueued: two calls in flight on two worker
    // threads then pair up with the same calls on the peers.
    void allreduce_sum(float* data, std::int64_t count) override {
        workers_.run([this, data, count, tag = next_tag()] { allreduce<float>(data, count, tag); });
    }
    // torch >= 2.8 sums c10::Half, converting each element through float with
    // c10's software conversions: fp16_sum does as torch does, at its pace
    // (common/half.hpp). Earlier torch ran gloo::float16's sum, about 2.3x
    // slower here (HalfSum).
    void allreduce_sum(Half* data, std::int64_t count) override {
        workers_.run([this, data, count, tag = next_tag()] { allreduce<Half>(data, count, tag, half_sum_); });
    }
    void allreduce_sum_async(float* data, std::int64_t count, Completion c) override {
        post(std::move(c), [this, data, count, tag = next_tag()] { allreduce<float>(data, count, tag); });
    }
    void allreduce_sum_async(Half* data, std::int64_t count, Completion c) override {
        post(std::move(c), [this, data, count, tag = next_tag()] { allreduce<Half>(data, count, tag, half_sum_); });
    }
    void reduce_scatter_sum(const float* in, float* out, std::int64_t per_rank) override {
        workers_.run([this, in, out, per_rank, tag = next_tag()] { reduce_scatter(in, out, per_rank, tag); });
    }
    void allgather(const float* in, float* out, std::int64_t per_rank) override {
        workers_.run([this, in, out, per_rank, tag = next_tag()] { gather(in, out, per_rank, tag); });
    }
    void broadcast(float* data, std::int64_t count, int root) override {
        workers_.run([this, data, count, root, tag = next_tag()] { bcast(data, count, root, tag); });
    }
    void reduce_sum(const float* in, float* out, std::int64_t count, int root) override {
        workers_.run([this, in, out, count, root, tag = next_tag()] { reduce(in, out, count, root, tag); });
    }
    void barrier() override {
        workers_.run([this, tag = next_tag()] {
            if (size() == 1) return;
            gloo::BarrierOptions opts(context_);
            opts.setTag(tag);
            gloo::barrier(opts);
        });
    }

private:
    void post(Completion c, std::function<void()> call) {
        workers_.post([c = std::move(c), call = std::move(call)] { run_completing(c, call); });
    }

    void reduce_scatter(const float* in, float* out, std::int64_t per_rank, std::uint32_t tag) {
        const auto n = static_cast<std::size_t>(per_rank) * static_cast<std::size_t>(size());
        std::unique_ptr<float[]> clone(new float[n]);  // input.clone(): fresh, uninitialised, then copied
        std::memcpy(clone.get(), in, n * sizeof(float));
        allreduce<float>(clone.get(), static_cast<std::int64_t>(n), tag);
        std::memcpy(out, clone.get() + static_cast<std::size_t>(rank()) * static_cast<std::size_t>(per_rank),
                    static_cast<std::size_t>(per_rank) * sizeof(float));
    }

    void gather(const float* in, float* out, std::int64_t per_rank, std::uint32_t tag) {
        if (size() == 1) {
            if (in != out) std::memmove(out, in, static_cast<std::size_t>(per_rank) * sizeof(float));
            return;
        }
        const auto n = static_cast<std::size_t>(per_rank) * static_cast<std::size_t>(size());
        std::unique_ptr<float[]> flat(new float[n]);
        gloo::AllgatherOptions opts(context_);
        opts.setInput(const_cast<float*>(in), static_cast<std::size_t>(per_rank));
        opts.setOutput(flat.get(), n);
        opts.setTag(tag);
        gloo::allgather(opts);
        std::memcpy(out, flat.get(), n * sizeof(float));
    }

    void bcast(float* data, std::int64_t count, int root, std::uint32_t tag) {
        if (size() == 1) return;
        gloo::BroadcastOptions opts(context_);
        opts.setRoot(root);
        opts.setOutput(data, static_cast<std::size_t>(count));
        opts.setTag(tag);
        gloo::broadcast(opts);
    }

    void reduce(const float* in, float* out, std::int64_t count, int root, std::uint32_t tag) {
        if (size() == 1) {
            if (in != out) std::memmove(out, in, static_cast<std::size_t>(count) * sizeof(float));
            return;
        }
        gloo::ReduceOptions opts(context_);
        opts.setRoot(root);
        if (in != out) opts.setInput(const_cast<float*>(in), static_cast<std::size_t>(count));
        opts.setOutput(out, static_cast<std::size_t>(count));
        opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, std::size_t)>(&gloo::sum<float>));
        opts.setTag(tag);
        gloo::reduce(opts);
    }

    using ReduceFn = void (*)(void*, const void*, const void*, std::size_t);
    static void c10_half_sum(void* c, const void* a, const void* b, std::size_t n) {
        fp16_sum(static_cast<Half*>(c), static_cast<const Half*>(a), static_cast<const Half*>(b), n);
    }

    template <typename T>
    void allreduce(T* data, std::int64_t count, std::uint32_t tag,
                   ReduceFn sum = static_cast<ReduceFn>(&gloo::sum<T>)) {
        if (size() == 1 || count == 0) return;
        gloo::AllreduceOptions opts(context_);
        opts.setOutput(data, static_cast<std::size_t>(count));
        opts.setReduceFunction(sum);
        opts.setTag(tag);
        gloo::allreduce(opts);
    }
    // Called by the issuing thread only (one at a time, Communicator's contract).
    std::uint32_t next_tag() { return tag_++; }

    std::shared_ptr<gloo::Context> context_;
    ReduceFn half_sum_;  // how fp16 allreduces sum (HalfSum)
    std::uint32_t tag_ = 0;
    Workers workers_{kWorkerThreads};  // last: stopped before the context goes
};

// When launched by mpirun (OMPI_COMM_WORLD_SIZE set), bound to exactly one
// CPU and with more online: widens this thread's affinity (threads it starts
// inherit it) to every online CPU and returns a note saying so; else changes
// nothing and returns "".
std::string unbind_as_torchrun_does() {
    if (std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr) return "";
    cpu_set_t mine;
    CPU_ZERO(&mine);
    if (sched_getaffinity(0, sizeof mine, &mine) != 0 || CPU_COUNT(&mine) != 1) return "";
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (online <= 1 || online > CPU_SETSIZE) return "";
    cpu_set_t all;
    CPU_ZERO(&all);
    for (int cpu = 0; cpu < online; ++cpu) CPU_SET(cpu, &all);
    if (sched_setaffinity(0, sizeof all, &all) != 0) return "";
    // This thread's mask: threads it starts later inherit it. dtsim makes its
    // communicators before it starts stream or worker threads.
    return fmt::format(
        "note: gloo: mpirun bound this rank to one CPU; dtsim unbound it to all {} online CPUs, as torchrun and "
        "mp.spawn leave torch's ranks (mpirun --bind-to none avoids the binding)",
        online);
}

}  // namespace

std::unique_ptr<Communicator> make_gloo_communicator(MPI_Comm comm, HalfSum half_sum) {
    static const std::string note = unbind_as_torchrun_does();
    static std::once_flag printed;
    std::call_once(printed, [&] {
        int world_rank = 0;
        MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
        if (!note.empty() && world_rank == 0) std::fprintf(stderr, "dtsim: %s\n", note.c_str());
    });
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    try {
        return std::make_unique<GlooCommunicator>(comm, rank, size, half_sum);
    } catch (const Error&) {
        throw;
    } catch (const std::exception& e) {
        throw Error(fmt::format("gloo could not connect {} ranks over TCP: {} (set GLOO_SOCKET_IFNAME to the "
                                "interface the ranks share, as for torch.distributed)",
                                size, e.what()));
    }
}

}  // namespace dtsim::runtime
