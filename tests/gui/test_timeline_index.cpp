// TimelineIndex: rows by nesting depth, the visible range by binary search,
// and sub-pixel spans merged into blocks (the level of detail that keeps a
// frame of a million spans fast).
#include "dtsim/gui/timeline_index.hpp"
#include "gui_test_support.hpp"

#include <catch2/catch.hpp>

#include <numeric>

using namespace dtsim;
using dtsim::gui::Block;
using dtsim::gui::TimelineIndex;
using traces::SpanKind;

TEST_CASE("nested spans go one row down and each row is disjoint and sorted", "[gui]") {
    test::ModelBuilder b;
    b.rank(0);
    const auto t = b.track(0, "thread 1");
    b.span(t, "child", SpanKind::compute, 100, 50);  // out of order on purpose
    b.span(t, "parent", SpanKind::compute, 0, 1000);
    b.span(t, "grandchild", SpanKind::compute, 110, 10);
    b.span(t, "sibling", SpanKind::compute, 2000, 10);
    const TimelineIndex index(b.build());
    REQUIRE(index.lanes().size() == 1);
    const auto& lane = index.lanes()[0];
    REQUIRE(lane.rows.size() == 3);
    const auto name_of = [&](std::int32_t span) {
        return std::string(index.model().str(index.model().spans[static_cast<std::size_t>(span)].name));
    };
    const auto& row0 = index.rows()[static_cast<std::size_t>(lane.rows[0])].spans;
    REQUIRE(row0.size() == 2);
    CHECK(name_of(row0[0]) == "parent");
    CHECK(name_of(row0[1]) == "sibling");
    CHECK(name_of(index.rows()[static_cast<std::size_t>(lane.rows[1])].spans.at(0)) == "child");
    CHECK(name_of(index.rows()[static_cast<std::size_t>(lane.rows[2])].spans.at(0)) == "grandchild");
    CHECK(index.begin_ns() == 0);
    CHECK(index.end_ns() == 2010);
}

TEST_CASE("spans narrower than a pixel merge into blocks but wide ones stay whole", "[gui]") {
    test::ModelBuilder b;
    b.rank(0);
    const auto t = b.track(0, "compute");
    // 1000 back-to-back spans of 1 ns, then one of 500 ns.
    for (int i = 0; i < 1000; ++i) b.span(t, "tiny", SpanKind::compute, i, 1);
    const auto wide = b.span(t, "wide", SpanKind::compute, 1000, 500);
    const TimelineIndex index(b.build());
    const auto& row = index.rows().at(0);
    std::vector<Block> blocks;

    SECTION("10 ns per pixel: the tiny spans fill 100 pixels as one block") {
        index.visible_blocks(row, 0, 10, 200, blocks);
        REQUIRE(blocks.size() == 2);
        CHECK(blocks[0].count == 1000);
        CHECK(blocks[0].x0_px == Approx(0));
        CHECK(blocks[0].x1_px == Approx(100));
        CHECK(blocks[1].span == wide);
        CHECK(blocks[1].count == 1);
        CHECK(blocks[1].x1_px - blocks[1].x0_px == Approx(50));
    }
    SECTION("the visible window cuts by binary search") {
        index.visible_blocks(row, 1100, 10, 20, blocks);  // 1100..1300 ns: inside the wide span
        REQUIRE(blocks.size() == 1);
        CHECK(blocks[0].span == wide);
        blocks.clear();
        index.visible_blocks(row, 2000, 10, 100, blocks);  // after everything
        CHECK(blocks.empty());
    }
    SECTION("zoomed in to 0.1 ns per pixel every span is drawn alone") {
        index.visible_blocks(row, 10, 0.1, 100, blocks);  // 10..20 ns
        CHECK(blocks.size() == 10);
        for (const auto& bl : blocks) CHECK(bl.count == 1);
    }
    SECTION("a gap of more than a pixel splits blocks") {
        test::ModelBuilder g;
        g.rank(0);
        const auto gt = g.track(0, "compute");
        for (int i = 0; i < 10; ++i) g.span(gt, "a", SpanKind::compute, i, 1);
        for (int i = 0; i < 10; ++i) g.span(gt, "b", SpanKind::compute, 100 + i, 1);
        const TimelineIndex gi(g.build());
        gi.visible_blocks(gi.rows().at(0), 0, 10, 100, blocks);
        REQUIRE(blocks.size() == 2);
        CHECK(blocks[0].count + blocks[1].count == 20);
    }
}

TEST_CASE("a frame of a million spans costs pixels not spans", "[gui]") {
    test::ModelBuilder b;
    b.rank(0);
    const auto t = b.track(0, "compute");
    auto& m = b.model();
    m.spans.reserve(1'000'000);
    for (int i = 0; i < 1'000'000; ++i) b.span(t, "k", SpanKind::compute, std::int64_t{i} * 10, 7);
    const TimelineIndex index(b.build());
    std::vector<Block> blocks;
    index.visible_blocks(index.rows().at(0), 0, 1e7 / 1000.0, 1000, blocks);  // all of it on 1000 px
    CHECK(blocks.size() <= 1001);
    const auto merged = std::accumulate(blocks.begin(), blocks.end(), std::int64_t{0},
                                        [](std::int64_t n, const Block& bl) { return n + bl.count; });
    CHECK(merged == 1'000'000);
    CHECK(index.span_at(index.rows().at(0), 5'000'003, 0) == 500'000);
}
