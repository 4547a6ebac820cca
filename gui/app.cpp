#include "dtsim/gui/app.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/gui/main_window.hpp"
#include "dtsim/gui/style.hpp"
#include "dtsim/gui/what_if.hpp"

#include <QApplication>
#include <QPixmap>
#include <QSettings>

#include <fmt/format.h>

namespace dtsim::gui {

int run_gui(const GuiOptions& options) {
    const bool offscreen = !options.screenshot.empty();
    if (offscreen && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
    if (!offscreen && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM") && qEnvironmentVariableIsEmpty("DISPLAY") &&
        qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY"))
        throw ConfigError(
            "no display to open a window on (DISPLAY is not set): run it in a desktop session, under `xvfb-run -a`, "
            "or render to a file with --screenshot out.png");
    if (!options.view.empty() && options.view != "timeline" && options.view != "whatif" && options.view != "compare")
        throw ConfigError(fmt::format("--view {}: expected timeline, whatif or compare", options.view));

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
                                      options.view == "whatif" ? "the what-if needs --model ..."
                                                               : "open a trace file or give --model ..."));
    for (const auto& [key, value] : options.what_if_changes) {
        if (!window.what_if()) throw ConfigError("--what-if-change needs a configuration: give --model ...");
        if (!window.what_if()->set_control(QString::fromStdString(key), QString::fromStdString(value)))
            throw ConfigError(fmt::format(
                "--what-if-change {}={}: no such control (strategy, micro_batch, nodes, precision, or a knob of "
                "the strategy shown: bucket_cap_mb, sharding_strategy, stage)",
                key, value));
    }
    window.resize(options.width_px, options.height_px);
    if (!offscreen) {
        window.show();
        return QApplication::exec();
    }
    window.setAttribute(Qt::WA_DontShowOnScreen);
    window.show();
    QApplication::processEvents();
    const QPixmap pixels = window.grab();
    if (!pixels.save(QString::fromStdString(options.screenshot)))
        throw ConfigError(fmt::format("--screenshot {}: cannot write the PNG there", options.screenshot));
    return 0;
}

}  // namespace dtsim::gui
