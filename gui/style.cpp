#include "dtsim/gui/style.hpp"

#include <QApplication>
#include <QPalette>
#include <QStyle>
#include <QStyleFactory>

#include <cmath>

namespace dtsim::gui {

using traces::SpanKind;

QColor kind_color(SpanKind kind) {
    switch (kind) {
        case SpanKind::compute: return QColor(0x4c, 0x78, 0xa8);
        case SpanKind::communication: return QColor(0xf5, 0x85, 0x18);
        case SpanKind::memory: return QColor(0x54, 0xa2, 0x4b);
        case SpanKind::host: return QColor(0xb2, 0x79, 0xa2);
        case SpanKind::annotation: return QColor(0xba, 0xb0, 0xac);
        case SpanKind::other: break;
    }
    return QColor(0x9d, 0x75, 0x5d);
}

QString kind_name(SpanKind kind) {
    switch (kind) {
        case SpanKind::compute: return QStringLiteral("compute");
        case SpanKind::communication: return QStringLiteral("communication");
        case SpanKind::memory: return QStringLiteral("memory");
        case SpanKind::host: return QStringLiteral("host");
        case SpanKind::annotation: return QStringLiteral("annotation");
        case SpanKind::other: break;
    }
    return QStringLiteral("other");
}

QString format_duration(double ns) {
    const double a = std::fabs(ns);
    const auto fixed = [](double v, const char* unit) {
        const double av = std::fabs(v);
        const int decimals = av >= 100 ? 1 : (av >= 10 ? 2 : 3);
        return QString::number(v, 'f', decimals) + QStringLiteral(" ") + QString::fromLatin1(unit);
    };
    if (a < 1e3) return QString::number(static_cast<long long>(std::llround(ns))) + QStringLiteral(" ns");
    if (a < 1e6) return fixed(ns / 1e3, "us");
    if (a < 1e9) return fixed(ns / 1e6, "ms");
    return fixed(ns / 1e9, "s");
}

QString format_bytes(double bytes) {
    const double a = std::fabs(bytes);
    if (a < 1024) return QString::number(static_cast<long long>(std::llround(bytes))) + QStringLiteral(" B");
    if (a < 1024.0 * 1024) return QString::number(bytes / 1024, 'f', 1) + QStringLiteral(" KiB");
    if (a < 1024.0 * 1024 * 1024) return QString::number(bytes / (1024.0 * 1024), 'f', 1) + QStringLiteral(" MiB");
    return QString::number(bytes / (1024.0 * 1024 * 1024), 'f', 2) + QStringLiteral(" GiB");
}

void apply_theme(QApplication& app, Theme theme) {
    QApplication::setStyle(QStyleFactory::create(QStringLiteral("Fusion")));
    if (theme == Theme::light) {
        app.setPalette(QApplication::style()->standardPalette());
        return;
    }
    QPalette p;
    const QColor window(0x2b, 0x2d, 0x30), base(0x1e, 0x1f, 0x22), text(0xdf, 0xe1, 0xe5);
    p.setColor(QPalette::Window, window);
    p.setColor(QPalette::WindowText, text);
    p.setColor(QPalette::Base, base);
    p.setColor(QPalette::AlternateBase, window);
    p.setColor(QPalette::ToolTipBase, QColor(0x3c, 0x3f, 0x41));
    p.setColor(QPalette::ToolTipText, text);
    p.setColor(QPalette::Text, text);
    p.setColor(QPalette::Button, window);
    p.setColor(QPalette::ButtonText, text);
    p.setColor(QPalette::BrightText, QColor(0xff, 0x6b, 0x6b));
    p.setColor(QPalette::Highlight, QColor(0x35, 0x74, 0xf0));
    p.setColor(QPalette::HighlightedText, Qt::white);
    p.setColor(QPalette::Mid, QColor(0x45, 0x48, 0x4c));
    p.setColor(QPalette::Dark, QColor(0x18, 0x19, 0x1b));
    p.setColor(QPalette::PlaceholderText, QColor(0x9a, 0x9d, 0xa3));
    p.setColor(QPalette::Disabled, QPalette::WindowText, QColor(0x80, 0x80, 0x80));
    p.setColor(QPalette::Disabled, QPalette::Text, QColor(0x80, 0x80, 0x80));
    p.setColor(QPalette::Disabled, QPalette::ButtonText, QColor(0x80, 0x80, 0x80));
    app.setPalette(p);
}

}  // namespace dtsim::gui
