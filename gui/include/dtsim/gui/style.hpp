// Colours, themes and number formats shared by every GUI view.
#pragma once

#include "dtsim/traces/trace_model.hpp"

#include <QColor>
#include <QString>

#include <array>
#include <cstdint>

class QApplication;

namespace dtsim::gui {

inline constexpr std::array kAllSpanKinds = {traces::SpanKind::compute,    traces::SpanKind::communication,
                                             traces::SpanKind::memory,     traces::SpanKind::host,
                                             traces::SpanKind::annotation, traces::SpanKind::other};

// One colour per SpanKind (Tableau 10 hues: distinct, and readable on light and dark backgrounds).
QColor kind_color(traces::SpanKind kind);
QString kind_name(traces::SpanKind kind);  // "compute", "communication", ...

// "850 ns", "12.4 us", "3.250 ms", "1.204 s": three significant digits or more.
QString format_duration(double ns);
// "512 B", "25.0 MiB", "1.50 GiB".
QString format_bytes(double bytes);

enum class Theme { light, dark };
// Fusion style with a light or dark palette; the timeline follows the palette.
void apply_theme(QApplication& app, Theme theme);

}  // namespace dtsim::gui
