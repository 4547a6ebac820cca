// A minimal SVG line chart (no external libraries): axes, ticks, labels, a
// title and one polyline with markers per series; a series may use a right axis.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace dtsim::advisor {

struct PlotSeries {
    std::string name;
    std::string color = "#1f77b4";
    bool right_axis = false;                        // plotted against the right y axis
    std::vector<std::pair<double, double>> points;  // (x, y), in increasing x
};

struct LinePlot {
    std::string title;
    std::string x_label;
    std::string y_label;      // left axis
    std::string y2_label;     // right axis (used when a series has right_axis)
    bool log2_x = false;      // x on a log2 scale with a tick at every sample's x
    bool y2_percent = false;  // right-axis ticks as percentages of 1.0
    std::vector<PlotSeries> series;
};

// The chart as an SVG document ("<svg ...>...</svg>\n").
std::string render_svg(const LinePlot& plot);

}  // namespace dtsim::advisor
