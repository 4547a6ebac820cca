// TimelineView: one trace drawn as lanes (a lane per rank and track, a rank
// collapsible to one line), a time ruler, a legend, and a counter track per
// rank (device memory, its peak marked). Mouse wheel zooms around the
// cursor, drag pans, F fits all, W/S zoom, A/D pan, / asks for a search,
// N / Shift+N step through the matches;
// hovering shows a span's details, a click selects it.
#pragma once

#include "dtsim/gui/timeline_index.hpp"

#include <QColor>
#include <QPoint>
#include <QRectF>
#include <QString>
#include <QWidget>

#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

class QScrollBar;

namespace dtsim::gui {

// Several lines of plain text describing a span: name, category and kind,
// start and duration, rank and track, every argument (bytes also in MiB/GiB).
QString span_description(const TimelineIndex& index, std::int32_t span);

class TimelineView : public QWidget {
    Q_OBJECT

public:
    static constexpr int kGutterPx = 190;   // track labels on the left
    static constexpr int kLegendPx = 22;
    static constexpr int kRulerPx = 24;
    static constexpr int kRowPx = 20;
    static constexpr int kRankHeaderPx = 22;
    static constexpr int kCounterPx = 56;

    explicit TimelineView(QWidget* parent = nullptr);

    // Shows a trace and fits it to the width. Selection and search are reset.
    void set_index(std::shared_ptr<const TimelineIndex> index);
    const TimelineIndex* index() const { return index_.get(); }

    // The visible window: time at the plot's left edge and nanoseconds per pixel.
    double t0_ns() const { return t0_ns_; }
    double ns_per_px() const { return ns_per_px_; }
    void set_window(double t0_ns, double ns_per_px);
    void fit_all();
    void zoom_at(double factor, double plot_x_px);  // factor > 1 zooms in around that pixel
    void pan_px(double dx_px);
    int plot_width_px() const;

    // Case-insensitive substring search on span names; matches are
    // highlighted and the rest dimmed. Empty clears it.
    void set_search(const QString& text);
    std::size_t match_count() const { return match_count_; }
    // Selects the next (+1) or previous (-1) match in time order, wrapping
    // round, and centres it (zooming in when it would be under 2 pixels wide);
    // N and Shift+N, or Enter and Shift+Enter in the search box. The position
    // counts from 1 ("3 of 17"); 0 before the first step.
    bool step_match(int direction);
    std::size_t match_position() const { return current_match_ + 1; }

    void select_span(std::int32_t span);  // -1 clears; arrows are drawn from its dependencies to it
    std::int32_t selected_span() const { return selected_; }
    // The spans a span waits for: the trace's flows into it (dtsim's "dep"
    // arrows, Kineto's launch-to-kernel "ac2g", ...), in flow order.
    std::vector<std::int32_t> dependencies_of(std::int32_t span) const;

    void set_rank_collapsed(std::size_t rank_group, bool collapsed);
    bool rank_collapsed(std::size_t rank_group) const;

    // Text added under a span's tooltip (the compare view's predicted against measured).
    void set_tooltip_note(std::function<QString(std::int32_t)> note);

    // Overrides the colour of each span (one per TraceModel span, e.g. by
    // prediction error) with its own legend; empty restores colours by kind.
    void set_span_colors(std::vector<QRgb> colors, std::vector<std::pair<QString, QColor>> legend);

    // Geometry, for tests and the compare view.
    int visible_lane_count() const;                         // lanes of expanded ranks
    std::optional<QRectF> span_rect(std::int32_t span) const;  // where a span is drawn (unclipped)
    std::int32_t span_at(QPoint pos) const;                  // -1 when none
    QString tooltip_at(QPoint pos) const;                    // empty when nothing is there
    double x_of_time(double t_ns) const;                     // widget x of a time

    QSize sizeHint() const override { return {1200, 600}; }

signals:
    void window_changed(double t0_ns, double ns_per_px);
    void span_selected(std::int32_t span);
    void search_requested();

protected:
    void paintEvent(QPaintEvent* event) override;
    void wheelEvent(QWheelEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void keyPressEvent(QKeyEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;
    bool event(QEvent* event) override;

private:
    enum class RowKind { rank_header, spans, counter };
    struct VisualRow {
        RowKind kind = RowKind::spans;
        std::int32_t index = 0;  // rank group, row or counter series
        std::int32_t lane = -1;  // spans: its lane (label on the depth-0 row)
        int y = 0;               // content y (before scrolling), below the ruler
        int height = 0;
    };

    void layout_rows();
    int rows_top() const { return kLegendPx + kRulerPx; }
    int content_height() const;
    void clamp_scroll();
    const VisualRow* visual_row_at(int y) const;
    QColor span_color(std::int32_t span) const;

    void paint_legend(class QPainter& p) const;
    void paint_ruler(QPainter& p) const;
    void paint_rows(QPainter& p);
    void paint_dependencies(QPainter& p) const;
    // The device-memory peak's categories, largest first (at most `most`), or empty.
    QString peak_breakdown_text(std::int32_t rank, std::size_t most, const QString& separator) const;
    void paint_span_row(QPainter& p, const VisualRow& vr, const Row& row, int y, int height);
    void paint_counter(QPainter& p, const CounterSeries& series, int y, int height) const;

    std::shared_ptr<const TimelineIndex> index_;
    std::vector<bool> collapsed_;         // per rank group
    std::array<bool, 6> kinds_present_{};  // per SpanKind: the legend lists these
    std::vector<VisualRow> visual_rows_;  // in drawing order
    std::vector<std::vector<std::int32_t>> matches_;  // per row: matching spans
    std::vector<char> is_match_;                     // per span
    std::size_t match_count_ = 0;
    std::vector<std::int32_t> ordered_matches_;  // every match, by start time
    std::vector<std::int32_t> selected_deps_;    // dependencies_of(selected_)
    std::function<QString(std::int32_t)> tooltip_note_;
    std::size_t current_match_ = static_cast<std::size_t>(-1);
    bool searching_ = false;
    std::vector<QRgb> span_colors_;
    std::vector<std::pair<QString, QColor>> legend_;
    std::int32_t selected_ = -1;
    double t0_ns_ = 0;
    double ns_per_px_ = 1;
    int scroll_y_ = 0;
    QPoint press_pos_;
    QPoint last_drag_pos_;
    bool dragging_ = false;
    bool pressed_ = false;
    std::vector<Block> blocks_;  // scratch, reused every frame
    QScrollBar* scroll_bar_ = nullptr;  // shown when the lanes are taller than the view
};

}  // namespace dtsim::gui
