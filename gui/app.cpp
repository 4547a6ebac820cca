#include "dtsim/gui/app.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/gui/compare_view.hpp"
#include "dtsim/gui/main_window.hpp"
#include "dtsim/gui/style.hpp"
#include "dtsim/gui/timeline_pane.hpp"
#include "dtsim/gui/what_if.hpp"

#include <QApplication>
#include <QLineEdit>
#include <QPixmap>
#include <QSettings>

#include <fmt/format.h>

namespace dtsim::gui {

namespace {

// Offscreen rendering needs no runtime directory or window-manager hints; Qt
// says so on every run. Everything else passes through.
void quiet_offscreen_notes(QtMsgType type, const QMessageLogContext& context, const QString& message) {
    if (message.contains(QStringLiteral("XDG_RUNTIME_DIR")) || message.contains(QStringLiteral("propagateSizeHints")))
        return;
    qt_message_output(type, context, message);
}

}  // namespace

void check_can_open(const std::string& screenshot) {
    if (screenshot.empty() && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM") && qEnvironmentVariableIsEmpty("DISPLAY") &&
        qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY"))
        throw ConfigError(
            "no display to open a window on (DISPLAY is not set): run it in a desktop session, under `xvfb-run -a`, "
            "or render to a file with --screenshot out.png (validate: --gui-screenshot out.png)");
}

int run_gui(const GuiOptions& options) {
    const bool offscreen = !options.screenshot.empty();
    check_can_open(options.screenshot);
    if (offscreen && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
    if (!options.view.empty() && options.view != "timeline" && options.view != "whatif" && options.view != "compare" &&
        options.view != "sweep")
        throw ConfigError(fmt::format("--view {}: expected timeline, whatif, compare or sweep", options.view));

    if (offscreen) qInstallMessageHandler(quiet_offscreen_notes);
    static int argc = 1;
    static char name[] = "dtsim";
    static char* argv[] = {name, nullptr};
    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("dtsim"));
    QApplication::setApplicationName(QStringLiteral("dtsim-gui"));
    const bool dark = options.dark || (!offscreen && QSettings().value(QStringLiteral("dark")).toBool());
    apply_theme(app, dark ? Theme::dark : Theme::light);

    MainWindow window(options);
    if (!options.view.empty() && !window.show_view(QString::fromStdString(options.view)))
        throw ConfigError(fmt::format("--view {}: nothing to show there ({})", options.view,
                                      options.view == "whatif"  ? "the what-if needs --model ..."
                                      : options.view == "sweep" ? "the sweep view needs --model ... with --axis or "
                                                                  "--space, or a `dtsim sweep --format json` file"
                                                                : "open a trace file or give --model ..."));
    for (const auto& [key, value] : options.what_if_changes) {
        if (!window.what_if()) throw ConfigError("--what-if-change needs a configuration: give --model ...");
        if (!window.what_if()->set_control(QString::fromStdString(key), QString::fromStdString(value)))
            throw ConfigError(fmt::format(
                "--what-if-change {}={}: no such control (strategy, micro_batch, nodes, precision, or a knob of "
                "the strategy shown: bucket_cap_mb, sharding_strategy, stage)",
                key, value));
    }
    if (!options.search.empty()) window.timeline()->search_box()->setText(QString::fromStdString(options.search));
    // Selecting centres the span, which needs the view's width: after the window is shown.
    const auto select = [&] {
        if (options.select.empty()) return;
        window.timeline()->search_box()->setText(QString::fromStdString(options.select));
        window.timeline()->step_match(1);
        if (window.timeline()->view()->selected_span() < 0)
            throw ConfigError(fmt::format("--select {}: no span's name contains it", options.select));
        // The selection stays; the highlight of the matches goes unless --search asked for one.
        window.timeline()->search_box()->setText(QString::fromStdString(options.search));
    };
    window.resize(options.width_px, options.height_px);
    if (!offscreen) {
        window.show();
        QApplication::processEvents();
        if (window.compare()) window.compare()->fit_all();
        select();
        if (options.window_ms) window.show_window_ms(options.window_ms->first, options.window_ms->second);
        return QApplication::exec();
    }
    window.setAttribute(Qt::WA_DontShowOnScreen);
    window.show();
    QApplication::processEvents();
    if (window.compare()) window.compare()->fit_all();  // now that the views have their widths
    select();
    if (options.window_ms) window.show_window_ms(options.window_ms->first, options.window_ms->second);
    QApplication::processEvents();
    const QPixmap pixels = window.grab();
    if (!pixels.save(QString::fromStdString(options.screenshot)))
        throw ConfigError(fmt::format("--screenshot {}: cannot write the PNG there", options.screenshot));
    return 0;
}

}  // namespace dtsim::gui
