#include "dtsim/gui/main_window.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/gui/compare_view.hpp"
#include "dtsim/gui/style.hpp"
#include "dtsim/gui/sweep_view.hpp"
#include "dtsim/gui/timeline_pane.hpp"
#include "dtsim/gui/timeline_view.hpp"
#include "dtsim/gui/trace_source.hpp"
#include "dtsim/gui/what_if.hpp"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QSettings>
#include <QStatusBar>
#include <QTabWidget>

#include <fmt/format.h>

namespace dtsim::gui {
namespace {

constexpr int kMaxRecent = 8;

QString names_of(const QStringList& paths) {
    QStringList names;
    for (const auto& p : paths) names << QFileInfo(p).fileName();
    return names.join(QStringLiteral(", "));
}

std::shared_ptr<const TimelineIndex> index_of_files(const std::vector<std::string>& paths) {
    return std::make_shared<TimelineIndex>(model_from_files(paths));
}

}  // namespace

MainWindow::MainWindow(const GuiOptions& options, QWidget* parent) : QMainWindow(parent), options_(options) {
    setWindowTitle(tr("dtsim"));
    setAcceptDrops(true);
    tabs_ = new QTabWidget(this);
    tabs_->setDocumentMode(true);
    setCentralWidget(tabs_);

    timeline_ = new TimelinePane(tabs_);
    tabs_->addTab(timeline_, tr("Timeline"));
    if (options.config) {
        what_if_ = new WhatIfPanel(*options.config, options.calibration, tabs_);
        tabs_->addTab(what_if_, tr("What-if"));
    }

    // The timeline tab: the files together (one rank per file), else the simulated configuration.
    if (!options.files.empty()) {
        QStringList paths;
        for (const auto& f : options.files) paths << QString::fromStdString(f);
        timeline_->set_index(index_of_files(options.files));
        timeline_->set_title(names_of(paths));
    } else if (what_if_ && what_if_->outcome().index) {
        timeline_->set_index(what_if_->outcome().index);
        timeline_->set_title(what_if_->outcome().title);
    }

    // Compare: a simulated configuration against one file, or two files (each one trace).
    const bool compare_asked = options.view == "compare";
    const std::size_t sources = options.files.size() + (what_if_ ? 1 : 0);
    if ((compare_asked && options.compares.empty()) || (what_if_ && options.files.size() == 1)) {
        if (sources != 2)
            throw ConfigError(fmt::format(
                "--view compare needs two traces: two files (predicted and measured, e.g. from `dtsim simulate "
                "--trace` and `dtsim execute --trace`), or --model ... with one measured file; got {}",
                sources));
        std::vector<std::pair<QString, std::shared_ptr<const TimelineIndex>>> traces;
        if (what_if_) traces.emplace_back(what_if_->outcome().title, what_if_->outcome().index);
        for (const auto& f : options.files)
            traces.emplace_back(QFileInfo(QString::fromStdString(f)).fileName(), index_of_files({f}));
        if (!traces[0].second) throw ConfigError("the configuration to compare could not be simulated");
        compare_ = new CompareView(tabs_);
        compare_->set_traces(traces[0].second, traces[1].second, traces[0].first, traces[1].first);
        tabs_->addTab(compare_, tr("Compare"));
    }
    for (const auto& pair : options.compares) {
        auto* view = new CompareView(tabs_);
        view->set_traces(std::make_shared<TimelineIndex>(model_from_timeline(pair.predicted)),
                         std::make_shared<TimelineIndex>(model_from_timeline(pair.measured)),
                         QString::fromStdString(pair.predicted.title), QString::fromStdString(pair.measured.title));
        view->set_measured_step(pair.measured_step);
        tabs_->addTab(view, tr("Compare %1").arg(QString::fromStdString(pair.name)));
        if (!compare_) {
            compare_ = view;
            tabs_->setCurrentWidget(view);
        }
    }
    if (what_if_ && options.files.empty() && !compare_) tabs_->setCurrentWidget(what_if_);
    if (!options.compares.empty() && options.files.empty() && !what_if_) {
        timeline_->set_index(std::make_shared<TimelineIndex>(model_from_timeline(options.compares.front().measured)));
        timeline_->set_title(tr("measured: %1").arg(QString::fromStdString(options.compares.front().measured.title)));
    }
    // A compare tab is fitted to its width the first time it is shown (the
    // first one by run_gui, once the window has its size).
    connect(tabs_, &QTabWidget::currentChanged, this, [this](int index) {
        auto* view = qobject_cast<CompareView*>(tabs_->widget(index));
        if (!view || view == compare_ || view->property("fitted").toBool()) return;
        view->setProperty("fitted", true);
        view->fit_all();
    });
    if (!options.sweep.empty()) {
        sweep_ = new SweepView(options.sweep, options.calibration, options.sweep_has_configs,
                               QString::fromStdString(options.sweep_title), options.sweep_recommended, tabs_);
        tabs_->addTab(sweep_, tr("Sweep"));
        tabs_->setCurrentWidget(sweep_);
    }

    build_menus();
    if (options.screenshot.empty()) {
        const QSettings settings;
        restoreGeometry(settings.value(QStringLiteral("geometry")).toByteArray());
        restoreState(settings.value(QStringLiteral("state")).toByteArray());
    }
    statusBar()->showMessage(tr("Open trace files with File > Open or by dropping them here"));
}

bool MainWindow::show_view(const QString& view) {
    QWidget* tab = view == QStringLiteral("timeline")  ? static_cast<QWidget*>(timeline_)
                   : view == QStringLiteral("whatif")  ? static_cast<QWidget*>(what_if_)
                   : view == QStringLiteral("compare") ? static_cast<QWidget*>(compare_)
                   : view == QStringLiteral("sweep")   ? static_cast<QWidget*>(sweep_)
                                                       : nullptr;
    if (!tab) return false;
    tabs_->setCurrentWidget(tab);
    return true;
}

void MainWindow::build_menus() {
    QMenu* file = menuBar()->addMenu(tr("&File"));
    QAction* open = file->addAction(tr("&Open trace..."));
    open->setShortcut(QKeySequence::Open);
    connect(open, &QAction::triggered, this, [this] {
        const QStringList paths =
            QFileDialog::getOpenFileNames(this, tr("Open traces or a sweep"), {},
                                          tr("Traces and sweeps (*.json *.json.gz *.pt.trace.json);;All files (*)"));
        if (!paths.isEmpty()) open_files(paths);
    });
    recent_ = file->addMenu(tr("Open &recent"));
    refresh_recent_menu();
    file->addSeparator();
    QAction* quit = file->addAction(tr("&Quit"));
    quit->setShortcut(QKeySequence::Quit);
    connect(quit, &QAction::triggered, this, &QWidget::close);

    QMenu* view = menuBar()->addMenu(tr("&View"));
    QAction* dark = view->addAction(tr("&Dark theme"));
    dark->setCheckable(true);
    dark->setChecked(options_.dark || QSettings().value(QStringLiteral("dark")).toBool());
    connect(dark, &QAction::toggled, this, [](bool on) {
        QSettings().setValue(QStringLiteral("dark"), on);
        apply_theme(*qApp, on ? Theme::dark : Theme::light);
    });
    QMenu* help = menuBar()->addMenu(tr("&Help"));
    connect(help->addAction(tr("&Keys")), &QAction::triggered, this, [this] {
        QMessageBox::information(this, tr("Keys"),
                                 tr("Mouse wheel: zoom around the cursor   Shift+wheel: scroll lanes\n"
                                    "Drag: pan   Click: select a span   Click a rank header: collapse it\n"
                                    "F: fit all   W/S: zoom in/out   A/D: pan left/right   /: search   Esc: clear"));
    });
}

void MainWindow::refresh_recent_menu() {
    recent_->clear();
    const QStringList recent = QSettings().value(QStringLiteral("recent")).toStringList();
    for (const auto& path : recent)
        connect(recent_->addAction(path), &QAction::triggered, this, [this, path] { open_files({path}); });
    recent_->setEnabled(!recent.isEmpty());
}

void MainWindow::open_files(const QStringList& paths) {
    std::vector<std::string> files;
    for (const auto& p : paths) files.push_back(p.toStdString());
    try {
        if (files.size() == 1 && advisor::looks_like_sweep_json(files.front())) {
            // A sweep file: its figures in the sweep view (the base configuration
            // for its rows' timelines comes only from the command line).
            std::optional<std::size_t> recommended;
            auto rows = advisor::read_sweep_json(files.front(), nullptr, &recommended);
            const QString title = tr("%1: %2 configurations").arg(paths.front()).arg(rows.size());
            auto* view = new SweepView(std::move(rows), {}, false, title, recommended, tabs_);
            if (sweep_) {
                const int at = tabs_->indexOf(sweep_);
                tabs_->removeTab(at);
                sweep_->deleteLater();
                tabs_->insertTab(at, view, tr("Sweep"));
            } else {
                tabs_->addTab(view, tr("Sweep"));
            }
            sweep_ = view;
            tabs_->setCurrentWidget(sweep_);
        } else {
            timeline_->set_index(index_of_files(files));
            timeline_->set_title(names_of(paths));
            tabs_->setCurrentWidget(timeline_);
        }
    } catch (const Error& e) {
        QMessageBox::warning(this, tr("Cannot open"), QString::fromUtf8(e.what()));
        return;
    }
    QSettings settings;
    QStringList recent = settings.value(QStringLiteral("recent")).toStringList();
    for (const auto& p : paths) {
        const QString absolute = QFileInfo(p).absoluteFilePath();
        recent.removeAll(absolute);
        recent.prepend(absolute);
    }
    while (recent.size() > kMaxRecent) recent.removeLast();
    settings.setValue(QStringLiteral("recent"), recent);
    refresh_recent_menu();
}

void MainWindow::show_window_ms(double from_ms, double to_ms) {
    const auto apply = [&](TimelineView* view) {
        if (!view || !view->index()) return;
        view->set_window(static_cast<double>(view->index()->begin_ns()) + from_ms * 1e6,
                         (to_ms - from_ms) * 1e6 / view->plot_width_px());
    };
    apply(timeline_->view());
    if (what_if_) apply(what_if_->timeline()->view());
    if (compare_) apply(compare_->predicted_view());  // the measured view follows
}

void MainWindow::save_state() const {
    QSettings settings;
    settings.setValue(QStringLiteral("geometry"), saveGeometry());
    settings.setValue(QStringLiteral("state"), saveState());
}

void MainWindow::dragEnterEvent(QDragEnterEvent* e) {
    if (e->mimeData()->hasUrls()) e->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* e) {
    QStringList paths;
    for (const auto& url : e->mimeData()->urls())
        if (url.isLocalFile()) paths << url.toLocalFile();
    if (!paths.isEmpty()) open_files(paths);
}

void MainWindow::closeEvent(QCloseEvent* e) {
    if (options_.screenshot.empty()) save_state();
    QMainWindow::closeEvent(e);
}

}  // namespace dtsim::gui
