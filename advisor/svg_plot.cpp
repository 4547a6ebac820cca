#include "dtsim/advisor/svg_plot.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace dtsim::advisor {
namespace {

constexpr double kWidth = 800, kHeight = 480;
constexpr double kLeft = 90, kRight = 90, kTop = 60, kBottom = 70;
constexpr double kPlotW = kWidth - kLeft - kRight, kPlotH = kHeight - kTop - kBottom;

std::string escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            default: out += c;
        }
    }
    return out;
}

// A 1-2-5 step that splits [0, max] into about `n` intervals.
double nice_step(double max, int n) {
    if (max <= 0) return 1;
    const double raw = max / n;
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
        if (raw <= m * mag) return m * mag;
    return 10 * mag;
}

std::string tick_label(double v, double step) {
    if (std::abs(v) >= 1e6) return fmt::format("{:.3g}M", v / 1e6);
    if (std::abs(v) >= 1e4) return fmt::format("{:.4g}k", v / 1e3);
    if (step >= 1) return fmt::format("{:.0f}", v);
    return fmt::format("{:.3g}", v);
}

struct Axis {
    double max = 1, step = 1;
};

Axis y_axis(const LinePlot& plot, bool right) {
    double max = 0;
    for (const auto& s : plot.series)
        if (s.right_axis == right)
            for (const auto& [x, y] : s.points) max = std::max(max, y);
    if (right && plot.y2_percent) max = std::max(max, 1.0);
    if (max <= 0) max = 1;
    Axis a;
    a.step = nice_step(max * 1.05, 5);
    a.max = std::ceil(max * 1.05 / a.step) * a.step;
    return a;
}

}  // namespace

std::string render_svg(const LinePlot& plot) {
    // X range over every series.
    double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin;
    std::vector<double> xs;
    for (const auto& s : plot.series)
        for (const auto& [x, y] : s.points) {
            xmin = std::min(xmin, x);
            xmax = std::max(xmax, x);
            if (std::find(xs.begin(), xs.end(), x) == xs.end()) xs.push_back(x);
        }
    std::sort(xs.begin(), xs.end());
    const bool log_x = plot.log2_x && !xs.empty() && xmin > 0;
    const auto tx = [&](double x) { return log_x ? std::log2(x) : x; };
    double lo = xs.empty() ? 0 : tx(xmin), hi = xs.empty() ? 1 : tx(xmax);
    if (hi - lo <= 0) {
        lo -= 1;
        hi += 1;
    }
    const double pad = (hi - lo) * 0.04;
    lo -= pad;
    hi += pad;
    const auto px = [&](double x) { return kLeft + (tx(x) - lo) / (hi - lo) * kPlotW; };

    const Axis left = y_axis(plot, false), right = y_axis(plot, true);
    const bool has_right =
        std::any_of(plot.series.begin(), plot.series.end(), [](const auto& s) { return s.right_axis; });
    const auto py = [&](double y, const Axis& a) { return kTop + kPlotH - y / a.max * kPlotH; };

    std::string out = fmt::format(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
        "font-family=\"sans-serif\" font-size=\"12\">\n"
        "<rect x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
        kWidth, kHeight);
    out +=
        fmt::format("<text x=\"{}\" y=\"28\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\">{}</text>\n",
                    kWidth / 2, escape(plot.title));

    // Grid and left-axis ticks.
    for (double v = 0; v <= left.max + left.step * 1e-9; v += left.step) {
        const double y = py(v, left);
        out += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e0e0e0\"/>\n",
                           kLeft, y, kLeft + kPlotW, y);
        out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", kLeft - 6, y + 4,
                           tick_label(v, left.step));
    }
    if (has_right)
        for (double v = 0; v <= right.max + right.step * 1e-9; v += right.step) {
            const double y = py(v, right);
            out += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"black\"/>\n",
                               kLeft + kPlotW, y, kLeft + kPlotW + 5);
            const std::string label = plot.y2_percent ? fmt::format("{:.0f}%", v * 100) : tick_label(v, right.step);
            out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n", kLeft + kPlotW + 8, y + 4, label);
        }
    // X ticks: every sample's x.
    for (double x : xs) {
        const double X = px(x);
        out += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"black\"/>\n", X,
                           kTop + kPlotH, kTop + kPlotH + 5);
        out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", X, kTop + kPlotH + 20,
                           fmt::format("{:g}", x));
    }
    // Axes.
    out += fmt::format("<polygon points=\"{0},{1} {0},{2} {3},{2}{4}\" fill=\"none\" stroke=\"black\"/>\n", kLeft, kTop,
                       kTop + kPlotH, kLeft + kPlotW, has_right ? fmt::format(" {},{}", kLeft + kPlotW, kTop) : "");
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}{}</text>\n", kLeft + kPlotW / 2,
                       kHeight - 22, escape(plot.x_label), log_x ? " (log scale)" : "");
    out += fmt::format(
        "<text x=\"{0:.1f}\" y=\"{1:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 {0:.1f} "
        "{1:.1f})\">{2}</text>\n",
        24.0, kTop + kPlotH / 2, escape(plot.y_label));
    if (has_right)
        out += fmt::format(
            "<text x=\"{0:.1f}\" y=\"{1:.1f}\" text-anchor=\"middle\" transform=\"rotate(90 {0:.1f} "
            "{1:.1f})\">{2}</text>\n",
            kWidth - 24, kTop + kPlotH / 2, escape(plot.y2_label));

    // Series: a polyline and a marker per point, then a legend entry.
    double legend_x = kLeft;
    const double legend_y = kTop - 14;
    for (const auto& s : plot.series) {
        const Axis& a = s.right_axis ? right : left;
        std::string pts;
        for (const auto& [x, y] : s.points)
            pts += fmt::format("{}{:.1f},{:.1f}", pts.empty() ? "" : " ", px(x), py(y, a));
        out += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{}/>\n", pts, s.color,
                           s.right_axis ? " stroke-dasharray=\"6 3\"" : "");
        for (const auto& [x, y] : s.points)
            out += fmt::format(
                "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\"><title>{}: {:g} at {:g}</title></circle>\n",
                px(x), py(y, a), s.color, escape(s.name), y, x);
        const double lx = legend_x;
        out += fmt::format(
            "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"2\"{}/>\n", lx,
            legend_y, lx + 24, legend_y, s.color, s.right_axis ? " stroke-dasharray=\"6 3\"" : "");
        out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}{}</text>\n", lx + 30, legend_y + 4, escape(s.name),
                           s.right_axis ? " (right axis)" : "");
        legend_x += 250;
    }
    out += "</svg>\n";
    return out;
}

}  // namespace dtsim::advisor
