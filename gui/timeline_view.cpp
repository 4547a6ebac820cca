#include "dtsim/gui/timeline_view.hpp"

#include "dtsim/gui/style.hpp"
#include "dtsim/gui/trace_source.hpp"

#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QResizeEvent>
#include <QScrollBar>
#include <QSignalBlocker>
#include <QToolTip>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>

namespace dtsim::gui {
namespace {

using traces::Span;

const Span& span_of(const TimelineIndex& index, std::int32_t i) {
    return index.model().spans[static_cast<std::size_t>(i)];
}

QString qstr(std::string_view s) { return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size())); }

// Ruler ticks: 1, 2 or 5 times a power of ten, about `target_px` apart.
double nice_step(double raw) {
    const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
    for (double m : {1.0, 2.0, 5.0})
        if (m * magnitude >= raw) return m * magnitude;
    return 10.0 * magnitude;
}

// A tick label in the unit the step calls for, with as many decimals as the step needs.
QString tick_label(double t_ns, double step_ns) {
    double unit = 1;
    const char* name = "ns";
    if (step_ns >= 1e8) unit = 1e9, name = "s";
    else if (step_ns >= 1e5) unit = 1e6, name = "ms";
    else if (step_ns >= 1e2) unit = 1e3, name = "us";
    const int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step_ns / unit) + 1e-9)));
    return QString::number(t_ns / unit, 'f', decimals) + QStringLiteral(" ") + QString::fromLatin1(name);
}

QColor text_color_on(const QColor& fill) { return fill.lightnessF() > 0.6 ? QColor(0x20, 0x20, 0x20) : Qt::white; }

}  // namespace

namespace {

// The spans a span waits for: the flows into it, in flow order.
std::vector<std::int32_t> flows_into(const traces::TraceModel& m, std::int32_t span) {
    std::vector<std::int32_t> out;
    for (const auto& f : m.flows)
        if (f.to_span == span && f.from_span >= 0) out.push_back(f.from_span);
    return out;
}

}  // namespace

QString span_description(const TimelineIndex& index, std::int32_t i) {
    const auto& m = index.model();
    const Span& s = span_of(index, i);
    const auto& track = m.tracks[static_cast<std::size_t>(s.track)];
    QString out = qstr(m.str(s.name));
    out += QStringLiteral("\ncategory: %1 (%2)").arg(qstr(m.str(s.category)), kind_name(s.kind));
    out += QStringLiteral("\nduration: %1, start %2")
               .arg(format_duration(static_cast<double>(s.dur_ns)),
                    format_duration(static_cast<double>(s.start_ns - index.begin_ns())));
    const auto rank = static_cast<std::size_t>(track.rank);
    out += QStringLiteral("\nrank %1, %2")
               .arg(rank < m.ranks.size() ? m.ranks[rank].rank : track.rank)
               .arg(QString::fromStdString(track.name));
    for (auto a = s.args_begin; a < s.args_end; ++a) {
        const auto& arg = m.args[static_cast<std::size_t>(a)];
        const QString key = qstr(m.str(arg.key));
        QString value = qstr(m.str(arg.value));
        if (arg.is_number && key.contains(QStringLiteral("bytes"), Qt::CaseInsensitive))
            value = QStringLiteral("%1 (%2)").arg(format_bytes(value.toDouble()), value);
        else if (arg.is_number && key.endsWith(QStringLiteral("_ns")))
            value = format_duration(value.toDouble());
        out += QStringLiteral("\n%1: %2").arg(key, value);
    }
    // What it waits for (the flows into it), drawn as arrows while it is selected.
    const std::vector<std::int32_t> deps = flows_into(m, i);
    if (!deps.empty()) out += QStringLiteral("\nwaits for %1:").arg(deps.size());
    constexpr std::size_t kListed = 8;
    for (std::size_t k = 0; k < deps.size() && k < kListed; ++k) {
        const Span& d = span_of(index, deps[k]);
        out += QStringLiteral("\n  %1 (%2, ends %3)")
                   .arg(qstr(m.str(d.name)), QString::fromStdString(m.tracks[static_cast<std::size_t>(d.track)].name),
                        format_duration(static_cast<double>(d.start_ns + d.dur_ns - index.begin_ns())));
    }
    if (deps.size() > kListed) out += QStringLiteral("\n  and %1 more").arg(deps.size() - kListed);
    return out;
}

TimelineView::TimelineView(QWidget* parent) : QWidget(parent) {
    setMouseTracking(true);
    setFocusPolicy(Qt::StrongFocus);
    setMinimumSize(400, 160);
    setAttribute(Qt::WA_OpaquePaintEvent);
    scroll_bar_ = new QScrollBar(Qt::Vertical, this);
    scroll_bar_->hide();
    connect(scroll_bar_, &QScrollBar::valueChanged, this, [this](int v) {
        if (v == scroll_y_) return;
        scroll_y_ = v;
        update();
    });
}

void TimelineView::set_index(std::shared_ptr<const TimelineIndex> index) {
    index_ = std::move(index);
    collapsed_.assign(index_ ? index_->ranks().size() : 0, false);
    kinds_present_.fill(false);
    if (index_)
        for (const auto& s : index_->model().spans) kinds_present_[static_cast<std::size_t>(s.kind)] = true;
    span_colors_.clear();
    legend_.clear();
    selected_ = -1;
    scroll_y_ = 0;
    set_search({});
    layout_rows();
    fit_all();
}

int TimelineView::plot_width_px() const {
    return std::max(1, width() - kGutterPx - (scroll_bar_->isVisibleTo(this) ? scroll_bar_->width() : 0));
}

void TimelineView::set_window(double t0_ns, double ns_per_px) {
    ns_per_px = std::clamp(ns_per_px, 1e-3, 1e15);
    if (t0_ns == t0_ns_ && ns_per_px == ns_per_px_) return;
    t0_ns_ = t0_ns;
    ns_per_px_ = ns_per_px;
    update();
    emit window_changed(t0_ns_, ns_per_px_);
}

void TimelineView::fit_all() {
    if (!index_) return;
    const double span_ns = static_cast<double>(index_->end_ns() - index_->begin_ns());
    const double margin_ns = span_ns * 0.01;
    set_window(static_cast<double>(index_->begin_ns()) - margin_ns, (span_ns + 2 * margin_ns) / plot_width_px());
}

void TimelineView::zoom_at(double factor, double plot_x_px) {
    const double t_at = t0_ns_ + plot_x_px * ns_per_px_;
    const double npp = std::max(1e-3, ns_per_px_ / factor);
    set_window(t_at - plot_x_px * npp, npp);
}

void TimelineView::pan_px(double dx_px) { set_window(t0_ns_ - dx_px * ns_per_px_, ns_per_px_); }

double TimelineView::x_of_time(double t_ns) const { return kGutterPx + (t_ns - t0_ns_) / ns_per_px_; }

void TimelineView::set_search(const QString& text) {
    matches_.clear();
    is_match_.clear();
    ordered_matches_.clear();
    current_match_ = static_cast<std::size_t>(-1);
    match_count_ = 0;
    searching_ = !text.isEmpty() && index_;
    if (searching_) {
        const auto& m = index_->model();
        std::vector<char> name_matches(m.strings.size(), 0);
        for (std::size_t i = 0; i < m.strings.size(); ++i)
            name_matches[i] = QString::fromStdString(m.strings[i]).contains(text, Qt::CaseInsensitive) ? 1 : 0;
        is_match_.assign(m.spans.size(), 0);
        matches_.resize(index_->rows().size());
        for (std::size_t r = 0; r < index_->rows().size(); ++r)
            for (std::int32_t s : index_->rows()[r].spans) {
                const auto name = span_of(*index_, s).name;
                if (name >= 0 && name_matches[static_cast<std::size_t>(name)]) {
                    matches_[r].push_back(s);
                    is_match_[static_cast<std::size_t>(s)] = 1;
                    ordered_matches_.push_back(s);
                    ++match_count_;
                }
            }
        std::sort(ordered_matches_.begin(), ordered_matches_.end(), [&](std::int32_t a, std::int32_t b) {
            const auto& sa = span_of(*index_, a);
            const auto& sb = span_of(*index_, b);
            return sa.start_ns != sb.start_ns ? sa.start_ns < sb.start_ns : a < b;
        });
    }
    update();
}

bool TimelineView::step_match(int direction) {
    if (ordered_matches_.empty()) return false;
    const std::size_t n = ordered_matches_.size();
    if (current_match_ >= n)
        current_match_ = direction >= 0 ? 0 : n - 1;
    else
        current_match_ = (current_match_ + (direction >= 0 ? 1 : n - 1)) % n;
    const std::int32_t span = ordered_matches_[current_match_];
    const auto& s = span_of(*index_, span);
    const double width = plot_width_px();
    double ns_per_px = ns_per_px_;
    // A match under 2 pixels is zoomed to a tenth of the view; one wider than the view is fitted.
    if (static_cast<double>(s.dur_ns) < 2 * ns_per_px)
        ns_per_px = std::max(1.0, static_cast<double>(s.dur_ns) * 10 / width);
    if (static_cast<double>(s.dur_ns) > width * ns_per_px) ns_per_px = static_cast<double>(s.dur_ns) * 1.1 / width;
    set_window(static_cast<double>(s.start_ns) + static_cast<double>(s.dur_ns) / 2 - width / 2 * ns_per_px, ns_per_px);
    selected_ = -1;  // so that the selection signal fires even when it was selected before
    select_span(span);
    return true;
}

void TimelineView::select_span(std::int32_t span) {
    if (span == selected_) return;
    selected_ = span;
    selected_deps_ = dependencies_of(span);
    update();
    emit span_selected(span);
}

void TimelineView::set_rank_collapsed(std::size_t rank_group, bool collapsed) {
    if (rank_group >= collapsed_.size()) return;
    collapsed_[rank_group] = collapsed;
    layout_rows();
    update();
}

bool TimelineView::rank_collapsed(std::size_t rank_group) const {
    return rank_group < collapsed_.size() && collapsed_[rank_group];
}

void TimelineView::set_span_colors(std::vector<QRgb> colors, std::vector<std::pair<QString, QColor>> legend) {
    span_colors_ = std::move(colors);
    legend_ = std::move(legend);
    update();
}

void TimelineView::layout_rows() {
    visual_rows_.clear();
    if (!index_) return;
    int y = 0;
    const auto add = [&](RowKind kind, std::int32_t index, std::int32_t lane, int height) {
        visual_rows_.push_back({.kind = kind, .index = index, .lane = lane, .y = y, .height = height});
        y += height;
    };
    for (std::size_t g = 0; g < index_->ranks().size(); ++g) {
        const RankGroup& group = index_->ranks()[g];
        add(RowKind::rank_header, static_cast<std::int32_t>(g), -1, kRankHeaderPx);
        if (collapsed_[g]) continue;
        for (std::int32_t l : group.lanes)
            for (std::int32_t r : index_->lanes()[static_cast<std::size_t>(l)].rows) add(RowKind::spans, r, l, kRowPx);
        for (std::size_t c = 0; c < index_->counters().size(); ++c)
            if (index_->counters()[c].rank == group.rank)
                add(RowKind::counter, static_cast<std::int32_t>(c), -1, kCounterPx);
        y += 4;  // a gap between ranks
    }
    clamp_scroll();
}

int TimelineView::content_height() const {
    return visual_rows_.empty() ? 0 : visual_rows_.back().y + visual_rows_.back().height;
}

void TimelineView::clamp_scroll() {
    const int viewport = height() - rows_top();
    const int overflow = std::max(0, content_height() - viewport);
    scroll_y_ = std::clamp(scroll_y_, 0, overflow);
    const QSignalBlocker block(scroll_bar_);
    scroll_bar_->setRange(0, overflow);
    scroll_bar_->setPageStep(std::max(1, viewport));
    scroll_bar_->setSingleStep(kRowPx);
    scroll_bar_->setValue(scroll_y_);
    const int w = scroll_bar_->sizeHint().width();
    scroll_bar_->setGeometry(width() - w, rows_top(), w, std::max(0, viewport));
    scroll_bar_->setVisible(overflow > 0);
}

const TimelineView::VisualRow* TimelineView::visual_row_at(int y) const {
    const int content_y = y - rows_top() + scroll_y_;
    if (y < rows_top()) return nullptr;
    for (const auto& vr : visual_rows_)
        if (content_y >= vr.y && content_y < vr.y + vr.height) return &vr;
    return nullptr;
}

int TimelineView::visible_lane_count() const {
    int lanes = 0;
    for (const auto& vr : visual_rows_)
        if (vr.kind == RowKind::spans && index_->rows()[static_cast<std::size_t>(vr.index)].depth == 0) ++lanes;
    return lanes;
}

std::optional<QRectF> TimelineView::span_rect(std::int32_t span) const {
    if (!index_ || span < 0) return std::nullopt;
    const std::int32_t row = index_->row_of(span);
    for (const auto& vr : visual_rows_)
        if (vr.kind == RowKind::spans && vr.index == row) {
            const Span& s = span_of(*index_, span);
            const double x0 = x_of_time(static_cast<double>(s.start_ns));
            const double x1 = x_of_time(static_cast<double>(s.start_ns + s.dur_ns));
            return QRectF(x0, rows_top() + vr.y - scroll_y_ + 1, std::max(1.0, x1 - x0), vr.height - 2);
        }
    return std::nullopt;
}

std::int32_t TimelineView::span_at(QPoint pos) const {
    if (!index_ || pos.x() < kGutterPx) return -1;
    const VisualRow* vr = visual_row_at(pos.y());
    if (!vr || vr->kind != RowKind::spans) return -1;
    const double t = t0_ns_ + (pos.x() - kGutterPx + 0.5) * ns_per_px_;
    return index_->span_at(index_->rows()[static_cast<std::size_t>(vr->index)], t, 2 * ns_per_px_);
}

QString TimelineView::tooltip_at(QPoint pos) const {
    if (!index_) return {};
    if (const std::int32_t s = span_at(pos); s >= 0)
        return span_description(*index_, s) + (tooltip_note_ ? tooltip_note_(s) : QString());
    const VisualRow* vr = visual_row_at(pos.y());
    if (vr && vr->kind == RowKind::counter && pos.x() >= kGutterPx) {
        const CounterSeries& c = index_->counters()[static_cast<std::size_t>(vr->index)];
        const double t = t0_ns_ + (pos.x() - kGutterPx) * ns_per_px_;
        auto it = std::upper_bound(c.time_ns.begin(), c.time_ns.end(), static_cast<std::int64_t>(t));
        if (it == c.time_ns.begin()) return {};
        const auto i = static_cast<std::size_t>(it - c.time_ns.begin()) - 1;
        const bool bytes = QString::fromStdString(c.name).contains(QStringLiteral("memory"));
        return QStringLiteral("%1: %2 at %3\npeak %4 at %5")
                   .arg(QString::fromStdString(c.name), bytes ? format_bytes(c.value[i]) : QString::number(c.value[i]),
                        format_duration(static_cast<double>(c.time_ns[i] - index_->begin_ns())),
                        bytes ? format_bytes(c.value[c.peak]) : QString::number(c.value[c.peak]),
                        format_duration(static_cast<double>(c.time_ns[c.peak] - index_->begin_ns()))) +
               (c.name == "device memory" ? peak_breakdown_text(c.rank, 99, QStringLiteral("\n  ")) : QString());
    }
    return {};
}

QColor TimelineView::span_color(std::int32_t span) const {
    if (!span_colors_.empty()) return QColor::fromRgba(span_colors_[static_cast<std::size_t>(span)]);
    return kind_color(span_of(*index_, span).kind);
}

// ---- painting ----

void TimelineView::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.fillRect(rect(), palette().base());
    if (!index_) {
        p.setPen(palette().color(QPalette::Text));
        p.drawText(rect(), Qt::AlignCenter, tr("No trace loaded: File > Open, or drop a trace file here"));
        return;
    }
    paint_rows(p);
    paint_dependencies(p);
    paint_ruler(p);
    paint_legend(p);
}

QString TimelineView::peak_breakdown_text(std::int32_t rank, std::size_t most, const QString& separator) const {
    std::vector<const traces::MemoryPart*> parts;
    for (const auto& part : index_->model().device_memory_peak)
        if (part.rank == rank) parts.push_back(&part);
    if (parts.empty()) return {};
    std::stable_sort(parts.begin(), parts.end(), [](const auto* a, const auto* b) { return a->bytes > b->bytes; });
    QStringList items;
    for (std::size_t i = 0; i < parts.size() && i < most; ++i)
        items << QStringLiteral("%1 %2").arg(
            QString::fromStdString(parts[i]->category).replace(QLatin1Char('_'), QLatin1Char(' ')),
            format_bytes(parts[i]->bytes));
    if (parts.size() > most) items << tr("%1 more").arg(parts.size() - most);
    return (separator.startsWith(QLatin1Char('\n')) ? separator : QStringLiteral(": ")) + items.join(separator);
}

void TimelineView::set_tooltip_note(std::function<QString(std::int32_t)> note) {
    tooltip_note_ = std::move(note);
}

std::vector<std::int32_t> TimelineView::dependencies_of(std::int32_t span) const {
    if (!index_ || span < 0) return {};
    return flows_into(index_->model(), span);
}

void TimelineView::paint_dependencies(QPainter& p) const {
    if (selected_ < 0 || selected_deps_.empty()) return;
    const auto to = span_rect(selected_);
    if (!to) return;
    p.save();
    p.setClipRect(QRect(kGutterPx, rows_top(), width() - kGutterPx, height() - rows_top()));
    p.setRenderHint(QPainter::Antialiasing);
    QColor ink = palette().color(QPalette::Text);
    ink.setAlpha(210);
    p.setPen(QPen(ink, 1.5));
    p.setBrush(ink);
    for (const std::int32_t d : selected_deps_) {
        const auto from = span_rect(d);
        if (!from) continue;  // on a collapsed rank
        // From the dependency's end to the waiting span's start, arrowhead at the start.
        const QPointF a(from->right(), from->center().y());
        const QPointF b(to->left(), to->center().y());
        p.drawLine(a, b);
        const double angle = std::atan2(b.y() - a.y(), b.x() - a.x());
        const auto wing = [&](double turn) {
            return b - QPointF(std::cos(angle + turn) * 8, std::sin(angle + turn) * 8);
        };
        p.drawPolygon(QPolygonF({b, wing(0.4), wing(-0.4)}));
    }
    p.restore();
}

void TimelineView::paint_legend(QPainter& p) const {
    const QRect area(0, 0, width(), kLegendPx);
    p.fillRect(area, palette().window());
    QFont f = font();
    f.setPointSizeF(f.pointSizeF() * 0.9);
    p.setFont(f);
    const QFontMetrics fm(f);
    int x = 8;
    const auto entry = [&](const QString& label, const QColor& color) {
        p.fillRect(QRect(x, 6, 12, 10), color);
        x += 16;
        p.setPen(palette().color(QPalette::WindowText));
        p.drawText(QRect(x, 0, fm.horizontalAdvance(label) + 4, kLegendPx), Qt::AlignVCenter, label);
        x += fm.horizontalAdvance(label) + 14;
    };
    if (!legend_.empty()) {
        for (const auto& [label, color] : legend_) entry(label, color);
    } else {
        for (std::size_t k = 0; k < kAllSpanKinds.size(); ++k)
            if (kinds_present_[k]) entry(kind_name(kAllSpanKinds[k]), kind_color(kAllSpanKinds[k]));
    }
    if (searching_) {
        p.setPen(palette().color(QPalette::WindowText));
        p.drawText(QRect(0, 0, width() - 8, kLegendPx), Qt::AlignVCenter | Qt::AlignRight,
                   tr("%n match(es)", nullptr, static_cast<int>(match_count_)));
    }
}

void TimelineView::paint_ruler(QPainter& p) const {
    const QRect area(0, kLegendPx, width(), kRulerPx);
    p.fillRect(area, palette().window());
    p.setPen(palette().color(QPalette::Mid));
    p.drawLine(0, area.bottom(), width(), area.bottom());
    const double step = nice_step(100.0 * ns_per_px_);
    const double origin = static_cast<double>(index_->begin_ns());
    const double t_left = t0_ns_ - origin;
    const double t_right = t_left + plot_width_px() * ns_per_px_;
    QFont f = font();
    f.setPointSizeF(f.pointSizeF() * 0.85);
    p.setFont(f);
    for (double t = std::ceil(t_left / step) * step; t <= t_right; t += step) {
        const int x = static_cast<int>(std::lround(x_of_time(t + origin)));
        p.setPen(palette().color(QPalette::WindowText));
        p.drawLine(x, area.bottom() - 6, x, area.bottom());
        p.drawText(QRect(x + 3, area.top(), 120, kRulerPx - 4), Qt::AlignLeft | Qt::AlignVCenter,
                   tick_label(std::abs(t) < step * 1e-6 ? 0.0 : t, step));
    }
    p.fillRect(QRect(0, area.top(), kGutterPx, kRulerPx), palette().window());
    p.setPen(palette().color(QPalette::WindowText));
    p.drawText(QRect(8, area.top(), kGutterPx - 8, kRulerPx), Qt::AlignVCenter,
               tr("window %1").arg(format_duration(plot_width_px() * ns_per_px_)));
}

void TimelineView::paint_rows(QPainter& p) {
    const int top = rows_top();
    const QRect plot(kGutterPx, top, plot_width_px(), height() - top);
    // Faint grid lines at the ruler's ticks.
    const double step = nice_step(100.0 * ns_per_px_);
    const double origin = static_cast<double>(index_->begin_ns());
    QColor grid = palette().color(QPalette::Mid);
    grid.setAlpha(60);
    p.setPen(grid);
    for (double t = std::ceil((t0_ns_ - origin) / step) * step; t <= t0_ns_ - origin + plot.width() * ns_per_px_;
         t += step) {
        const int x = static_cast<int>(std::lround(x_of_time(t + origin)));
        p.drawLine(x, top, x, height());
    }
    const QColor text = palette().color(QPalette::WindowText);
    for (const auto& vr : visual_rows_) {
        const int y = top + vr.y - scroll_y_;
        if (y + vr.height < top || y > height()) continue;
        p.setClipRect(QRect(0, top, width(), height() - top));
        switch (vr.kind) {
            case RowKind::rank_header: {
                const auto g = static_cast<std::size_t>(vr.index);
                const RankGroup& group = index_->ranks()[g];
                QColor band = palette().color(QPalette::AlternateBase);
                p.fillRect(QRect(0, y, width(), vr.height), band);
                QFont bold = font();
                bold.setBold(true);
                p.setFont(bold);
                p.setPen(text);
                const QString arrow = collapsed_[g] ? QStringLiteral("\u25b8 ") : QStringLiteral("\u25be ");
                const QString label =
                    arrow + QString::fromStdString(group.label) +
                    (collapsed_[g] ? tr("  (%n track(s))", nullptr, static_cast<int>(group.lanes.size())) : QString());
                p.drawText(QRect(6, y, collapsed_[g] ? kGutterPx * 3 : width(), vr.height), Qt::AlignVCenter,
                           label);
                p.setFont(font());
                if (collapsed_[g] && !group.lanes.empty()) {
                    // A collapsed rank shows its first track's activity as a thin band.
                    const Lane& lane = index_->lanes()[static_cast<std::size_t>(group.lanes.front())];
                    VisualRow summary = vr;
                    p.setClipRect(plot.intersected(QRect(kGutterPx, y, plot.width(), vr.height)));
                    paint_span_row(p, summary, index_->rows()[static_cast<std::size_t>(lane.rows.front())], y + 14,
                                   vr.height - 14);
                }
                break;
            }
            case RowKind::spans: {
                const Row& row = index_->rows()[static_cast<std::size_t>(vr.index)];
                if (row.depth == 0) {
                    p.setPen(grid);
                    p.drawLine(0, y, width(), y);
                    p.setPen(text);
                    const Lane& lane = index_->lanes()[static_cast<std::size_t>(vr.lane)];
                    p.drawText(QRect(18, y, kGutterPx - 22, vr.height), Qt::AlignVCenter,
                               p.fontMetrics().elidedText(QString::fromStdString(lane.label), Qt::ElideRight,
                                                          kGutterPx - 22));
                }
                p.setClipRect(plot.intersected(QRect(kGutterPx, y, plot.width(), vr.height)));
                paint_span_row(p, vr, row, y, vr.height);
                break;
            }
            case RowKind::counter: {
                const CounterSeries& c = index_->counters()[static_cast<std::size_t>(vr.index)];
                p.setPen(grid);
                p.drawLine(0, y, width(), y);
                p.setPen(text);
                p.drawText(QRect(18, y + 2, kGutterPx - 22, vr.height - 4), Qt::AlignTop | Qt::TextWordWrap,
                           QString::fromStdString(c.name));
                p.setClipRect(plot.intersected(QRect(kGutterPx, y, plot.width(), vr.height)));
                paint_counter(p, c, y, vr.height);
                break;
            }
        }
    }
    p.setClipping(false);
    p.setPen(palette().color(QPalette::Mid));
    for (const auto& vr : visual_rows_) {
        const int y = top + vr.y - scroll_y_;
        if (vr.kind != RowKind::rank_header && y + vr.height >= top && y <= height())
            p.drawLine(kGutterPx - 1, std::max(top, y), kGutterPx - 1, std::min(height(), y + vr.height));
    }
}

void TimelineView::paint_span_row(QPainter& p, const VisualRow&, const Row& row, int y, int height) {
    const std::size_t row_index = static_cast<std::size_t>(&row - index_->rows().data());
    blocks_.clear();
    index_->visible_blocks(row, t0_ns_, ns_per_px_, plot_width_px(), blocks_);
    const auto draw_block = [&](const Block& b, QColor color, bool label) {
        const double x0 = std::max(-2.0, b.x0_px), x1 = std::min(plot_width_px() + 2.0, b.x1_px);
        const QRectF r(kGutterPx + x0, y + 1, std::max(1.0, x1 - x0), height - 2);
        // A pixel of background between back-to-back spans wide enough to show it.
        p.fillRect(r.width() >= 4 ? r.adjusted(0, 0, -1, 0) : r, color);
        if (label && b.count == 1 && r.width() > 28 && height >= 14) {
            p.setPen(text_color_on(color));
            const QString name = qstr(index_->model().str(span_of(*index_, b.span).name));
            p.drawText(r.adjusted(3, 0, -2, 0), Qt::AlignVCenter | Qt::AlignLeft,
                       p.fontMetrics().elidedText(name, Qt::ElideRight, static_cast<int>(r.width()) - 5));
        }
    };
    for (const Block& b : blocks_) {
        QColor color = span_color(b.span);
        if (searching_) color.setAlpha(55);
        draw_block(b, color, !searching_);
    }
    if (searching_ && row_index < matches_.size() && !matches_[row_index].empty()) {
        blocks_.clear();
        TimelineIndex::visible_blocks(index_->model(), matches_[row_index], t0_ns_, ns_per_px_, plot_width_px(),
                                      blocks_);
        for (const Block& b : blocks_) {
            draw_block(b, span_color(b.span), true);
            p.setPen(QPen(QColor(0xff, 0xd7, 0x00), 2));
            p.setBrush(Qt::NoBrush);
            p.drawRect(QRectF(kGutterPx + std::max(-2.0, b.x0_px), y + 1,
                              std::max(1.0, std::min(plot_width_px() + 2.0, b.x1_px) - std::max(-2.0, b.x0_px)),
                              height - 2));
        }
    }
    if (selected_ >= 0 && index_->row_of(selected_) == static_cast<std::int32_t>(row_index)) {
        const Span& s = span_of(*index_, selected_);
        const double x0 = std::max(-4.0, x_of_time(static_cast<double>(s.start_ns)));
        const double x1 = std::min(width() + 4.0, x_of_time(static_cast<double>(s.start_ns + s.dur_ns)));
        p.setPen(QPen(palette().color(QPalette::Highlight), 2));
        p.setBrush(Qt::NoBrush);
        p.drawRect(QRectF(x0, y, std::max(2.0, x1 - x0), height));
    }
}

void TimelineView::paint_counter(QPainter& p, const CounterSeries& c, int y, int height) const {
    if (c.time_ns.empty()) return;
    const double peak = std::max(1.0, c.value[c.peak]);
    const double base_y = y + height - 3;
    const double scale = (height - 16) / peak;
    const double t1 = t0_ns_ + plot_width_px() * ns_per_px_;
    // Step function: each sample's value holds until the next. Samples that
    // share a pixel column collapse to the column's maximum.
    auto it = std::upper_bound(c.time_ns.begin(), c.time_ns.end(), static_cast<std::int64_t>(t0_ns_));
    std::size_t i = it == c.time_ns.begin() ? 0 : static_cast<std::size_t>(it - c.time_ns.begin()) - 1;
    QPainterPath path;
    double x = std::max(x_of_time(static_cast<double>(c.time_ns[i])), kGutterPx - 2.0);
    path.moveTo(x, base_y);
    double last_x = x, last_v = c.value[i];
    path.lineTo(x, base_y - last_v * scale);
    for (++i; i < c.time_ns.size() && static_cast<double>(c.time_ns[i]) <= t1; ++i) {
        const double xi = x_of_time(static_cast<double>(c.time_ns[i]));
        if (xi - last_x < 1.0) {
            if (c.value[i] > last_v) {
                last_v = c.value[i];
                path.lineTo(last_x, base_y - last_v * scale);
            }
            continue;
        }
        path.lineTo(xi, base_y - last_v * scale);
        last_v = c.value[i];
        path.lineTo(xi, base_y - last_v * scale);
        last_x = xi;
    }
    const double end_x = i < c.time_ns.size() ? width() + 2.0 : std::min(width() + 2.0, last_x);
    path.lineTo(end_x, base_y - last_v * scale);
    path.lineTo(end_x, base_y);
    path.closeSubpath();
    const QColor line(0x2a, 0x9d, 0x8f);
    QColor fill = line;
    fill.setAlpha(70);
    p.setPen(QPen(line, 1));
    p.setBrush(fill);
    p.drawPath(path);
    // The peak: a red tick and its value.
    const double px = x_of_time(static_cast<double>(c.time_ns[c.peak]));
    const double py = base_y - c.value[c.peak] * scale;
    p.setPen(QPen(QColor(0xe4, 0x57, 0x56), 2));
    p.drawLine(QPointF(px, py - 2), QPointF(px, base_y));
    const bool bytes = QString::fromStdString(c.name).contains(QStringLiteral("memory"));
    QString label = tr("peak %1").arg(bytes ? format_bytes(c.value[c.peak]) : QString::number(c.value[c.peak]));
    if (c.name == "device memory") label += peak_breakdown_text(c.rank, 3, QStringLiteral(", "));
    // Right of the peak, else left of it, never over the lane labels; elided when wider than the plot.
    label = fontMetrics().elidedText(label, Qt::ElideRight, plot_width_px() - 8);
    const int w = fontMetrics().horizontalAdvance(label) + 6;
    const double lx = std::max(kGutterPx + 2.0, px + w + 4 > width() ? px - w - 4 : px + 4);
    p.setPen(palette().color(QPalette::WindowText));
    p.drawText(QRectF(lx, y + 1, w, 14), Qt::AlignLeft | Qt::AlignVCenter, label);
}

// ---- interaction ----

void TimelineView::wheelEvent(QWheelEvent* e) {
    const QPoint delta = e->angleDelta();
    if (e->modifiers() & Qt::ShiftModifier || std::abs(delta.x()) > std::abs(delta.y())) {
        scroll_y_ -= (delta.x() != 0 ? delta.x() : delta.y()) / 2;
        clamp_scroll();
        update();
    } else {
        zoom_at(std::pow(1.2, delta.y() / 120.0), e->position().x() - kGutterPx);
    }
    e->accept();
}

void TimelineView::mousePressEvent(QMouseEvent* e) {
    if (e->button() != Qt::LeftButton) return;
    pressed_ = true;
    dragging_ = false;
    press_pos_ = last_drag_pos_ = e->position().toPoint();
}

void TimelineView::mouseMoveEvent(QMouseEvent* e) {
    if (!pressed_) return;
    const QPoint pos = e->position().toPoint();
    if (!dragging_ && (pos - press_pos_).manhattanLength() > 3) dragging_ = true;
    if (dragging_) {
        const QPoint d = pos - last_drag_pos_;
        last_drag_pos_ = pos;
        scroll_y_ -= d.y();
        clamp_scroll();
        pan_px(d.x());
        update();
    }
}

void TimelineView::mouseReleaseEvent(QMouseEvent* e) {
    if (e->button() != Qt::LeftButton || !pressed_) return;
    pressed_ = false;
    if (dragging_) return;
    const QPoint pos = e->position().toPoint();
    if (const VisualRow* vr = visual_row_at(pos.y()); vr && vr->kind == RowKind::rank_header) {
        const auto g = static_cast<std::size_t>(vr->index);
        set_rank_collapsed(g, !rank_collapsed(g));
        return;
    }
    select_span(span_at(pos));
}

void TimelineView::keyPressEvent(QKeyEvent* e) {
    const double centre = plot_width_px() / 2.0;
    switch (e->key()) {
        case Qt::Key_F: fit_all(); break;
        case Qt::Key_W: zoom_at(1.5, centre); break;
        case Qt::Key_S: zoom_at(1 / 1.5, centre); break;
        case Qt::Key_A: pan_px(plot_width_px() * 0.15); break;
        case Qt::Key_D: pan_px(-plot_width_px() * 0.15); break;
        case Qt::Key_Slash: emit search_requested(); break;
        case Qt::Key_N: step_match(e->modifiers() & Qt::ShiftModifier ? -1 : 1); break;
        case Qt::Key_Escape: select_span(-1); break;
        default: QWidget::keyPressEvent(e); return;
    }
    e->accept();
}

void TimelineView::resizeEvent(QResizeEvent* e) {
    QWidget::resizeEvent(e);
    clamp_scroll();
    // Keep the same stretch of time in view as the plot widens or narrows.
    const int old_plot_px = e->oldSize().width() - kGutterPx;
    if (old_plot_px > 0)
        set_window(t0_ns_, ns_per_px_ * old_plot_px / plot_width_px());
    else
        fit_all();
}

bool TimelineView::event(QEvent* e) {
    if (e->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(e);
        const QString text = tooltip_at(help->pos());
        if (text.isEmpty())
            QToolTip::hideText();
        else
            QToolTip::showText(help->globalPos(), text, this);
        return true;
    }
    return QWidget::event(e);
}

}  // namespace dtsim::gui
