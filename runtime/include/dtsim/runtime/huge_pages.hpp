// Large float buffers on transparent huge pages (2 MiB) where the kernel
// allows it (THP "madvise" or "always"). Shared-memory MPI copies large
// messages between processes page by page (CMA), and a buffer of 4 KiB pages
// lands on different physical pages at each launch: measured here, a cold
// 4 MiB allreduce took 1.2-1.9 ms from launch to launch on small pages and
// 0.7-1.0 ms on huge pages. The executor's buffers and the calibration's use
// this allocator alike, so both see the same memory.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace dtsim::runtime {

// Allocates 2 MiB-aligned, rounded-up blocks and asks for huge pages on
// blocks of at least 2 MiB; smaller ones come from operator new.
void* allocate_huge_page_backed(std::size_t bytes);
void release_huge_page_backed(void* p, std::size_t bytes) noexcept;

template <class T>
struct HugePageAllocator {
    using value_type = T;
    HugePageAllocator() = default;
    template <class U>
    HugePageAllocator(const HugePageAllocator<U>&) noexcept {}
    T* allocate(std::size_t n) { return static_cast<T*>(allocate_huge_page_backed(n * sizeof(T))); }
    void deallocate(T* p, std::size_t n) noexcept { release_huge_page_backed(p, n * sizeof(T)); }
    template <class U>
    bool operator==(const HugePageAllocator<U>&) const noexcept {
        return true;
    }
};

// The buffers of the CPU backend's kernels and collectives.
using Floats = std::vector<float, HugePageAllocator<float>>;

}  // namespace dtsim::runtime
