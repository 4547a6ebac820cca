#include "dtsim/runtime/huge_pages.hpp"

#include <sys/mman.h>

#include <cstdlib>

namespace dtsim::runtime {
namespace {

constexpr std::size_t kHugePage = 2u << 20;

std::size_t rounded(std::size_t bytes) {
    return (bytes + kHugePage - 1) / kHugePage * kHugePage;
}

}  // namespace

void* allocate_huge_page_backed(std::size_t bytes) {
    if (bytes < kHugePage) return ::operator new(bytes);
    void* p = std::aligned_alloc(kHugePage, rounded(bytes));
    if (p == nullptr) throw std::bad_alloc();
    // Advice only: where THP is off the buffer keeps small pages.
    ::madvise(p, rounded(bytes), MADV_HUGEPAGE);
    return p;
}

void release_huge_page_backed(void* p, std::size_t bytes) noexcept {
    if (bytes < kHugePage)
        ::operator delete(p);
    else
        std::free(p);
}

}  // namespace dtsim::runtime
